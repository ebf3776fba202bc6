-- 0005: the engine's bookkeeping of an instance, kept until now as JSON in
-- instances.extra, becomes real columns (store.Instance fields). Values are
-- copied from extra where it is valid JSON (a damaged extra reset the
-- bookkeeping before, and still does); then extra is dropped.
ALTER TABLE instances ADD COLUMN previous_state_id TEXT    NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN previous_version  TEXT    NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN desired_version   TEXT    NOT NULL DEFAULT '';
-- satisfied: a JSON array of "<channel>@<version>".
ALTER TABLE instances ADD COLUMN satisfied         TEXT    NOT NULL DEFAULT '[]';
ALTER TABLE instances ADD COLUMN rollback_from     TEXT    NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN rollback_reason   TEXT    NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN failed_version    TEXT    NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN healed            INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN action_seq        INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN action_pending    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN applied_at        TEXT;

UPDATE instances SET
	previous_state_id = COALESCE(json_extract(extra, '$.previousStateId'), ''),
	previous_version  = COALESCE(json_extract(extra, '$.previousVersion'), ''),
	desired_version   = COALESCE(json_extract(extra, '$.desiredVersion'), ''),
	satisfied         = CASE WHEN json_type(extra, '$.satisfied') = 'array' THEN json_extract(extra, '$.satisfied') ELSE '[]' END,
	rollback_from     = COALESCE(json_extract(extra, '$.rollbackFrom'), ''),
	rollback_reason   = COALESCE(json_extract(extra, '$.rollbackReason'), ''),
	failed_version    = COALESCE(json_extract(extra, '$.failedVersion'), ''),
	healed            = COALESCE(json_extract(extra, '$.healed'), 0),
	action_seq        = COALESCE(json_extract(extra, '$.actionSeq'), 0),
	action_pending    = COALESCE(json_extract(extra, '$.actionPending'), 0),
	applied_at        = json_extract(extra, '$.appliedAt')
WHERE extra IS NOT NULL AND json_valid(extra);

ALTER TABLE instances DROP COLUMN extra;
