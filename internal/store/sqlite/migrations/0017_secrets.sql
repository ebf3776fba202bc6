-- 0017: secrets (store.Secret): the versions of the secrets drover keeps
-- (drover secrets set), one row a version, numbered from 0 per key. value is
-- sealed by the store's sealer (it holds the secret); a deleted version keeps
-- its row with value NULL and deleted_at set, so that its number is never
-- given again and a reference KEY-N never comes to mean another value (who
-- deleted it is in the audit log).
CREATE TABLE secrets (
	key        TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	value      BLOB,
	created_by TEXT    NOT NULL DEFAULT '',
	created_at TEXT    NOT NULL,
	deleted_at TEXT,
	PRIMARY KEY (key, version)
);
