-- 0011: runtimes served by an agent (store.LinkedRuntime, drover runtimes
-- link). token_hash is the hex SHA-256 of the agent's join token, unique: an
-- agent is known by it. labels is a JSON object (NULL = none); agent is what
-- the server holding the agent's connection recorded (store.AgentState as
-- JSON, times in UTC).
CREATE TABLE linked_runtimes (
	name       TEXT PRIMARY KEY,
	labels     TEXT,
	token_hash TEXT NOT NULL UNIQUE,
	created_at TEXT NOT NULL,
	agent      BLOB NOT NULL
) WITHOUT ROWID;
