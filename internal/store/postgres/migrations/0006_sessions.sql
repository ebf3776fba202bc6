-- 0006: sessions (store.Session), as the SQLite store's migration 0015 keeps
-- them: the people signed in through the OpenID provider (drover login --sso,
-- the browser sign-in).
--
-- A session is kept as the hex SHA-256 of its secret (hash, unique among all
-- sessions, ended ones included); several sessions may share an identity (a
-- laptop and a browser), which the index sessions_identity finds for
-- RevokeSessionsOf. roles are the bindings the person's groups mapped to at
-- sign-in (ROLE, ROLE@APP, ROLE@APP/CHANNEL) and groups the groups as the
-- provider named them, NULL when there are none. Times are nanoseconds since
-- the Unix epoch; expires_at is required, and NULL is the zero time for the
-- others (not revoked, never used). Ended sessions are deleted
-- (DeleteEndedSessions): sessions are credentials, not history, and are not
-- dumped.
CREATE TABLE sessions (
	id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	hash         TEXT   NOT NULL CONSTRAINT sessions_hash UNIQUE,
	identity     TEXT COLLATE "C" NOT NULL,
	subject      TEXT   NOT NULL DEFAULT '',
	roles        TEXT[],
	groups       TEXT[],
	via          TEXT   NOT NULL DEFAULT '',
	source       TEXT   NOT NULL DEFAULT '',
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	revoked_at   BIGINT,
	revoked_by   TEXT   NOT NULL DEFAULT '',
	last_used_at BIGINT
);
CREATE INDEX sessions_identity ON sessions (identity);
