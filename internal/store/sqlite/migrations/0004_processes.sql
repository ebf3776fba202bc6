-- 0004: processes, the commands runtimes started on this host and have not
-- seen end. A row is written as a command starts and deleted once its process
-- group is gone; rows left by a crash tell the next server which process
-- groups to end before it applies again. handle is opaque to the store (a
-- localexec.Group as JSON: process group id, leader start time, boot id).
CREATE TABLE processes (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	application     TEXT    NOT NULL DEFAULT '',
	service         TEXT    NOT NULL DEFAULT '',
	release_channel TEXT    NOT NULL DEFAULT '',
	runtime         TEXT    NOT NULL DEFAULT '',
	kind            TEXT    NOT NULL,
	version         TEXT    NOT NULL DEFAULT '',
	command         TEXT,
	handle          BLOB    NOT NULL,
	started_at      TEXT    NOT NULL
);

-- Open apply attempts are looked up at every start.
CREATE INDEX apply_attempts_open ON apply_attempts (id) WHERE finished_at IS NULL;
