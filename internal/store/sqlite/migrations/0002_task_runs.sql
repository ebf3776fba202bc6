-- 0002: task runs, the commands runtimes ran for an instance (fetch, apply,
-- getInfo, plan) with their output, kept so people can read it.
--
-- command is a JSON array of strings (NULL when empty). stdout and stderr are
-- TEXT kept byte for byte (the runtime already bounded them; truncated says
-- something was dropped). RecordRun keeps only the newest 200 runs per
-- (application, service, release_channel, kind): the index serves both that
-- pruning and listing newest first. AUTOINCREMENT keeps ids from being reused.
CREATE TABLE task_runs (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	application     TEXT    NOT NULL,
	service         TEXT    NOT NULL,
	release_channel TEXT    NOT NULL,
	runtime         TEXT    NOT NULL DEFAULT '',
	kind            TEXT    NOT NULL,
	version         TEXT    NOT NULL DEFAULT '',
	command         TEXT,
	exit_code       INTEGER NOT NULL DEFAULT 0,
	error           TEXT    NOT NULL DEFAULT '',
	started_at      TEXT    NOT NULL,
	finished_at     TEXT    NOT NULL,
	stdout          TEXT    NOT NULL DEFAULT '',
	stderr          TEXT    NOT NULL DEFAULT '',
	truncated       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX task_runs_instance_kind ON task_runs (application, service, release_channel, kind, id DESC);
