-- 0005: API tokens (store.APIToken, drover tokens) and the audit log
-- (store.AuditRecord), as the SQLite store's migration 0014 keeps them.
--
-- A token is kept as the hex SHA-256 of its value (hash, unique among all
-- tokens, revoked ones included); its name is unique among the tokens not
-- revoked (the partial index api_tokens_live_name), so a revoked token's name
-- may be given again. roles is the list of its bindings (ROLE, ROLE@APP,
-- ROLE@APP/CHANNEL), NULL when it has none. Times are nanoseconds since the
-- Unix epoch; NULL is the zero time (never expires, not revoked, never used).
CREATE TABLE api_tokens (
	id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name         TEXT COLLATE "C" NOT NULL,
	hash         TEXT   NOT NULL CONSTRAINT api_tokens_hash UNIQUE,
	roles        TEXT[],
	created_by   TEXT   NOT NULL DEFAULT '',
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT,
	revoked_at   BIGINT,
	revoked_by   TEXT   NOT NULL DEFAULT '',
	last_used_at BIGINT
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- audit: the requests that changed something, or tried to; append-only,
-- nothing deletes from it. seq is drawn and committed in order as events' is
-- (CACHE 1, and appends take the advisory lock auditLock before they insert:
-- see doc.go), so a reader paging with AfterSeq skips no record.
CREATE TABLE audit (
	seq             BIGINT GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
	time            BIGINT NOT NULL,
	identity        TEXT COLLATE "C" NOT NULL,
	identity_kind   TEXT   NOT NULL DEFAULT '',
	source          TEXT   NOT NULL DEFAULT '',
	action          TEXT   NOT NULL,
	application     TEXT COLLATE "C" NOT NULL DEFAULT '',
	service         TEXT COLLATE "C" NOT NULL DEFAULT '',
	release_channel TEXT COLLATE "C" NOT NULL DEFAULT '',
	target          TEXT   NOT NULL DEFAULT '',
	status          BIGINT NOT NULL DEFAULT 0,
	outcome         TEXT   NOT NULL,
	message         TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX audit_application ON audit (application, seq);
CREATE INDEX audit_time ON audit (time);
