-- 0012: the servers that accept agents (store.Replica), as each last
-- announced itself: name is its replica name (as in leases and task claims),
-- agent_url where agents reach it directly, seen_at when it last announced
-- itself (by the store's clock). Rows not seen for store.ReplicaForgetAfter
-- are deleted by the next PutReplica. Replicas are not dumped: servers
-- announce themselves again.
CREATE TABLE replicas (
	name      TEXT PRIMARY KEY,
	agent_url TEXT NOT NULL,
	seen_at   TEXT NOT NULL
) WITHOUT ROWID;
