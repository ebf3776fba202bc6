-- 0014: API tokens (store.APIToken, drover tokens) and the audit log
-- (store.AuditRecord). A token is kept as the hex SHA-256 of its value
-- (hash, unique); its name is unique among the tokens not revoked, so a
-- revoked token's name may be given again. roles is a JSON array of
-- bindings. The audit log is append-only: nothing deletes from it.
CREATE TABLE api_tokens (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	name         TEXT NOT NULL,
	hash         TEXT NOT NULL UNIQUE,
	roles        TEXT NOT NULL DEFAULT '[]',
	created_by   TEXT NOT NULL DEFAULT '',
	created_at   TEXT NOT NULL,
	expires_at   TEXT,
	revoked_at   TEXT,
	revoked_by   TEXT NOT NULL DEFAULT '',
	last_used_at TEXT
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

CREATE TABLE audit (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	time            TEXT    NOT NULL,
	identity        TEXT    NOT NULL,
	identity_kind   TEXT    NOT NULL DEFAULT '',
	source          TEXT    NOT NULL DEFAULT '',
	action          TEXT    NOT NULL,
	application     TEXT    NOT NULL DEFAULT '',
	service         TEXT    NOT NULL DEFAULT '',
	release_channel TEXT    NOT NULL DEFAULT '',
	target          TEXT    NOT NULL DEFAULT '',
	status          INTEGER NOT NULL DEFAULT 0,
	outcome         TEXT    NOT NULL,
	message         TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_application ON audit (application, seq);
CREATE INDEX audit_time ON audit (time);
