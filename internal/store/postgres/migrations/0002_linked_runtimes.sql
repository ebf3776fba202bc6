-- 0002: runtimes served by an agent (store.LinkedRuntime, drover runtimes
-- link), as the SQLite store's migration 0011 keeps them. token_hash is the
-- hex SHA-256 of the agent's join token, unique: an agent is known by it.
-- labels is a JSON object (NULL = none); agent is what the server holding the
-- agent's connection recorded (store.AgentState as JSON, times in UTC).
CREATE TABLE linked_runtimes (
	name       TEXT COLLATE "C" PRIMARY KEY,
	labels     BYTEA,
	token_hash TEXT   NOT NULL UNIQUE,
	created_at BIGINT NOT NULL,
	agent      BYTEA  NOT NULL
);
