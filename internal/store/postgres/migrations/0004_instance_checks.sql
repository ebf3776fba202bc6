-- 0004: the last results of an instance's command checks (protections that
-- run a taskConfig or kubernetesConfig), as the SQLite store's migration 0013
-- keeps them: a JSON array of store.CheckResult, NULL when none.
ALTER TABLE instances ADD COLUMN checks BYTEA;
