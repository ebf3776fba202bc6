-- 0003: the servers that accept agents (store.Replica), as each last
-- announced itself, as the SQLite store's migration 0012 keeps them: name is
-- its replica name (as in leases and task claims), agent_url where agents
-- reach it directly, seen_at when it last announced itself, by the database's
-- clock (nanoseconds since the Unix epoch, like leases.expires). Rows not seen
-- for store.ReplicaForgetAfter are deleted by the next PutReplica. Replicas
-- are not dumped: servers announce themselves again.
CREATE TABLE replicas (
	name      TEXT COLLATE "C" PRIMARY KEY,
	agent_url TEXT   NOT NULL,
	seen_at   BIGINT NOT NULL
);
