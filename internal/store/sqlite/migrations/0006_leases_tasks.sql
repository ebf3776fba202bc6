-- 0006: leases and durable tasks (see store/work.go).
--
-- leases: one row per key ever claimed. token only grows (a release keeps
-- the row with expires in the past), so a new holder always gets a higher
-- token than every earlier one and fenced writes can compare tokens.
CREATE TABLE leases (
	key     TEXT    PRIMARY KEY,
	owner   TEXT    NOT NULL,
	token   INTEGER NOT NULL,
	expires TEXT    NOT NULL
) WITHOUT ROWID;

-- tasks: work enqueued with the plan that decides it, claimed by runners.
-- payload is opaque to the store.
CREATE TABLE tasks (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	key         TEXT    NOT NULL,
	instance    TEXT    NOT NULL DEFAULT '',
	kind        TEXT    NOT NULL,
	payload     BLOB,
	status      TEXT    NOT NULL,
	owner       TEXT    NOT NULL DEFAULT '',
	token       INTEGER NOT NULL DEFAULT 0,
	attempts    INTEGER NOT NULL DEFAULT 0,
	expires     TEXT,
	created_at  TEXT    NOT NULL,
	claimed_at  TEXT,
	finished_at TEXT,
	message     TEXT    NOT NULL DEFAULT ''
);

-- At most one open task per key and instance.
CREATE UNIQUE INDEX tasks_open_instance ON tasks (key, instance) WHERE status IN ('pending', 'running');
-- Claims look at open tasks, oldest first.
CREATE INDEX tasks_open ON tasks (id) WHERE status IN ('pending', 'running');
CREATE INDEX tasks_key ON tasks (key, instance, id);
