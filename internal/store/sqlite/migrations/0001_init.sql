-- 0001: drover's initial schema.
--
-- Times are TEXT in UTC, RFC 3339 with exactly nine fractional digits
-- ("2006-01-02T15:04:05.000000000Z"), so they round-trip to the nanosecond and
-- sort lexically; NULL means the zero time. JSON documents are BLOBs, stored
-- byte for byte. Booleans are INTEGER 0/1.

-- configs keeps every version of every config object.
CREATE TABLE configs (
	kind       TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	version    INTEGER NOT NULL CHECK (version > 0),
	body       BLOB,
	hash       TEXT    NOT NULL,
	source     TEXT    NOT NULL DEFAULT '',
	created_at TEXT    NOT NULL,
	PRIMARY KEY (kind, name, version)
);

-- desired_states holds every push. ord is the insertion order ("newest first"
-- never depends on clocks). At most one desired state per service is active
-- (replaced_by IS NULL); the deferred foreign key lets CreateDesiredState
-- point the previous one at the new id before inserting it.
CREATE TABLE desired_states (
	ord              INTEGER PRIMARY KEY,
	id               TEXT    NOT NULL UNIQUE,
	application      TEXT    NOT NULL,
	service          TEXT    NOT NULL,
	version          TEXT    NOT NULL DEFAULT '',
	config_version   INTEGER NOT NULL DEFAULT 0,
	compiled         BLOB,
	params           BLOB,
	rollback         INTEGER NOT NULL DEFAULT 0,
	release_channels TEXT,
	created_by       TEXT    NOT NULL DEFAULT '',
	created_at       TEXT    NOT NULL,
	replaced_by      TEXT REFERENCES desired_states (id) DEFERRABLE INITIALLY DEFERRED
);
CREATE UNIQUE INDEX desired_states_active ON desired_states (application, service) WHERE replaced_by IS NULL;
CREATE INDEX desired_states_service ON desired_states (application, service, ord);

-- approvals: one record per (desired state, topic, user); the first wins.
CREATE TABLE approvals (
	ord              INTEGER PRIMARY KEY,
	desired_state_id TEXT    NOT NULL REFERENCES desired_states (id),
	application      TEXT    NOT NULL DEFAULT '',
	service          TEXT    NOT NULL DEFAULT '',
	release_channel  TEXT    NOT NULL DEFAULT '',
	topic            TEXT    NOT NULL,
	user_name        TEXT    NOT NULL,
	reject           INTEGER NOT NULL DEFAULT 0,
	comment          TEXT    NOT NULL DEFAULT '',
	created_at       TEXT    NOT NULL,
	UNIQUE (desired_state_id, topic, user_name)
);

-- instances: the engine's state per (application, service, release channel).
-- revision starts at 1 and increases by one with every write.
CREATE TABLE instances (
	application      TEXT    NOT NULL,
	service          TEXT    NOT NULL,
	release_channel  TEXT    NOT NULL,
	desired_state_id TEXT    NOT NULL DEFAULT '',
	target_state_id  TEXT    NOT NULL DEFAULT '',
	target_version   TEXT    NOT NULL DEFAULT '',
	current_state_id TEXT    NOT NULL DEFAULT '',
	current_version  TEXT    NOT NULL DEFAULT '',
	status           TEXT    NOT NULL DEFAULT '',
	reason           TEXT    NOT NULL DEFAULT '',
	message          TEXT    NOT NULL DEFAULT '',
	paused           INTEGER NOT NULL DEFAULT 0,
	apply_attempts   INTEGER NOT NULL DEFAULT 0,
	last_apply_at    TEXT,
	converged_at     TEXT,
	updated_at       TEXT,
	extra            BLOB,
	revision         INTEGER NOT NULL CHECK (revision > 0),
	PRIMARY KEY (application, service, release_channel)
) WITHOUT ROWID;

-- apply_attempts: written before the runtime is called, finished afterwards.
CREATE TABLE apply_attempts (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	application      TEXT    NOT NULL,
	service          TEXT    NOT NULL,
	release_channel  TEXT    NOT NULL DEFAULT '',
	desired_state_id TEXT    NOT NULL REFERENCES desired_states (id),
	version          TEXT    NOT NULL DEFAULT '',
	started_at       TEXT    NOT NULL,
	finished_at      TEXT,
	outcome          TEXT    NOT NULL DEFAULT '',
	message          TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX apply_attempts_service ON apply_attempts (application, service, id);

-- events: the append-only history. AUTOINCREMENT guarantees a seq is never
-- reused, even after the newest rows are deleted.
CREATE TABLE events (
	seq              INTEGER PRIMARY KEY AUTOINCREMENT,
	time             TEXT    NOT NULL,
	application      TEXT    NOT NULL DEFAULT '',
	service          TEXT    NOT NULL DEFAULT '',
	release_channel  TEXT    NOT NULL DEFAULT '',
	desired_state_id TEXT    NOT NULL DEFAULT '',
	type             TEXT    NOT NULL DEFAULT '',
	actor            TEXT    NOT NULL DEFAULT '',
	message          TEXT    NOT NULL DEFAULT '',
	data             BLOB
);
CREATE INDEX events_service ON events (application, service, seq);
