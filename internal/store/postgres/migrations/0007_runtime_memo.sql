-- 0007: what an instance's runtime asked to remember of its last successful
-- apply (store.Instance.RuntimeMemo), as the SQLite store's migration 0016
-- keeps it.
ALTER TABLE instances ADD COLUMN runtime_memo TEXT NOT NULL DEFAULT '';
