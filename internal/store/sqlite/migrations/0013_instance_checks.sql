-- 0013: the last results of an instance's command checks (protections that
-- run a taskConfig or kubernetesConfig), one per check run key: a JSON array
-- of store.CheckResult ("[]" when none).
ALTER TABLE instances ADD COLUMN checks TEXT NOT NULL DEFAULT '[]';
