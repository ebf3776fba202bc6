-- 0016: what an instance's runtime asked to remember of its last successful
-- apply (store.Instance.RuntimeMemo), kept with the instance so that every
-- server sharing the store, and every agent, sees the same: an apply-only
-- custom runtime's last apply, which used to live in one server's data
-- directory.
ALTER TABLE instances ADD COLUMN runtime_memo TEXT NOT NULL DEFAULT '';
