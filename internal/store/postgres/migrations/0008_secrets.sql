-- 0008: secrets (store.Secret), as the SQLite store's migration 0017 keeps
-- them: the versions of the secrets drover keeps (drover secrets set), one
-- row a version, numbered from 0 per key. value is sealed by the store's
-- sealer (it holds the secret); a deleted version keeps its row with value
-- NULL and deleted_at set, so that its number is never given again and a
-- reference KEY-N never comes to mean another value (who deleted it is in
-- the audit log). Times are nanoseconds since the Unix epoch.
CREATE TABLE secrets (
	key        TEXT COLLATE "C" NOT NULL,
	version    BIGINT NOT NULL,
	value      BYTEA,
	created_by TEXT   NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	deleted_at BIGINT,
	PRIMARY KEY (key, version)
);
