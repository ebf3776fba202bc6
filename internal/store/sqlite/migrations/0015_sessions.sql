-- 0015: sessions (store.Session): the people signed in through the OpenID
-- provider (drover login --sso, the browser sign-in). A session is kept as
-- the hex SHA-256 of its secret (hash, unique among all sessions, ended ones
-- included); several sessions may share an identity (a laptop and a
-- browser), which the index sessions_identity finds for RevokeSessionsOf.
-- roles and groups are JSON arrays ('[]' when empty): the bindings the
-- person's groups mapped to at sign-in, and the groups as the provider named
-- them. expires_at is required; revoked_at is set when the session ended
-- early (sign-out, revocation), by revoked_by. Ended sessions are deleted
-- (DeleteEndedSessions): sessions are credentials, not history, and are not
-- dumped.
CREATE TABLE sessions (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	hash         TEXT NOT NULL UNIQUE,
	identity     TEXT NOT NULL,
	subject      TEXT NOT NULL DEFAULT '',
	roles        TEXT NOT NULL DEFAULT '[]',
	groups       TEXT NOT NULL DEFAULT '[]',
	via          TEXT NOT NULL DEFAULT '',
	source       TEXT NOT NULL DEFAULT '',
	created_at   TEXT NOT NULL,
	expires_at   TEXT NOT NULL,
	revoked_at   TEXT,
	revoked_by   TEXT NOT NULL DEFAULT '',
	last_used_at TEXT
);
CREATE INDEX sessions_identity ON sessions (identity);
