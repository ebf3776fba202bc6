-- 0001: drover's schema on PostgreSQL, equivalent to the SQLite store's after
-- its migrations 0001-0010 (see internal/store/sqlite/migrations).
--
-- Times are BIGINT nanoseconds since the Unix epoch (UTC), so Go times
-- round-trip to the nanosecond (timestamptz keeps microseconds); NULL is the
-- zero time. JSON documents, opaque payloads and command output are BYTEA,
-- kept byte for byte; nil is NULL. Keys and names that lists are ordered by
-- compare with COLLATE "C" (byte order), whatever the database's collation.

-- configs keeps every version of every config object. PutConfig compares the
-- hash with the latest version only.
CREATE TABLE configs (
	kind       TEXT COLLATE "C" NOT NULL,
	name       TEXT COLLATE "C" NOT NULL,
	version    BIGINT NOT NULL CHECK (version > 0),
	body       BYTEA,
	hash       TEXT   NOT NULL,
	source     TEXT   NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	PRIMARY KEY (kind, name, version)
);

-- desired_states holds every push. ord is the order of creation ("newest
-- first" never depends on clocks). At most one desired state per service is
-- active (replaced_by IS NULL); the deferred foreign key lets
-- CreateDesiredState point the previous one at the new id before inserting
-- it. compiled_from names the row whose compiled copy this one shares (a push
-- identical to the active desired state stores no second copy); pruned_at is
-- set when retention dropped the compiled copy.
CREATE TABLE desired_states (
	id               TEXT COLLATE "C" PRIMARY KEY,
	ord              BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
	application      TEXT COLLATE "C" NOT NULL,
	service          TEXT COLLATE "C" NOT NULL,
	version          TEXT    NOT NULL DEFAULT '',
	config_version   BIGINT  NOT NULL DEFAULT 0,
	params           BYTEA,
	rollback         BOOLEAN NOT NULL DEFAULT false,
	release_channels TEXT[],
	created_by       TEXT    NOT NULL DEFAULT '',
	created_at       BIGINT  NOT NULL,
	replaced_by      TEXT COLLATE "C" REFERENCES desired_states (id) DEFERRABLE INITIALLY DEFERRED,
	compiled_from    TEXT COLLATE "C",
	pruned_at        BIGINT
);
CREATE UNIQUE INDEX desired_states_active ON desired_states (application, service) WHERE replaced_by IS NULL;
CREATE INDEX desired_states_service ON desired_states (application, service, ord);
CREATE INDEX desired_states_compiled_from ON desired_states (compiled_from) WHERE compiled_from IS NOT NULL;

-- desired_state_compiled holds the compiled copies apart from the
-- desired_states rows, which the engine reads often. A row that shares
-- another's copy (compiled_from) has no row here, and retention deletes the
-- rows it prunes.
CREATE TABLE desired_state_compiled (
	id       TEXT COLLATE "C" PRIMARY KEY REFERENCES desired_states (id),
	compiled BYTEA NOT NULL
);

-- approvals: one record per (desired state, topic, user); the first wins.
-- ord is the order of recording.
CREATE TABLE approvals (
	ord              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	desired_state_id TEXT COLLATE "C" NOT NULL REFERENCES desired_states (id),
	application      TEXT    NOT NULL DEFAULT '',
	service          TEXT    NOT NULL DEFAULT '',
	release_channel  TEXT    NOT NULL DEFAULT '',
	topic            TEXT COLLATE "C" NOT NULL,
	user_name        TEXT COLLATE "C" NOT NULL,
	reject           BOOLEAN NOT NULL DEFAULT false,
	comment          TEXT    NOT NULL DEFAULT '',
	created_at       BIGINT  NOT NULL,
	UNIQUE (desired_state_id, topic, user_name)
);

-- instances: the engine's state per (application, service, release channel).
-- revision starts at 1 and increases by one with every write.
CREATE TABLE instances (
	application       TEXT COLLATE "C" NOT NULL,
	service           TEXT COLLATE "C" NOT NULL,
	release_channel   TEXT COLLATE "C" NOT NULL,
	desired_state_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
	target_state_id   TEXT COLLATE "C" NOT NULL DEFAULT '',
	target_version    TEXT    NOT NULL DEFAULT '',
	current_state_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
	current_version   TEXT    NOT NULL DEFAULT '',
	status            TEXT    NOT NULL DEFAULT '',
	reason            TEXT    NOT NULL DEFAULT '',
	message           TEXT    NOT NULL DEFAULT '',
	paused            BOOLEAN NOT NULL DEFAULT false,
	apply_attempts    BIGINT  NOT NULL DEFAULT 0,
	last_apply_at     BIGINT,
	converged_at      BIGINT,
	updated_at        BIGINT,
	previous_state_id TEXT COLLATE "C" NOT NULL DEFAULT '',
	previous_version  TEXT    NOT NULL DEFAULT '',
	desired_version   TEXT    NOT NULL DEFAULT '',
	satisfied         TEXT[],
	rollback_from     TEXT    NOT NULL DEFAULT '',
	rollback_reason   TEXT    NOT NULL DEFAULT '',
	failed_version    TEXT    NOT NULL DEFAULT '',
	healed            BIGINT  NOT NULL DEFAULT 0,
	action_seq        BIGINT  NOT NULL DEFAULT 0,
	action_pending    BOOLEAN NOT NULL DEFAULT false,
	applied_at        BIGINT,
	revision          BIGINT  NOT NULL CHECK (revision > 0),
	PRIMARY KEY (application, service, release_channel)
);

-- events: the append-only history. seq comes from an identity sequence with
-- CACHE 1 (values are handed out in call order across sessions); inserts take
-- a transaction-level advisory lock first, so seqs also commit in order (see
-- doc.go).
CREATE TABLE events (
	seq              BIGINT GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
	time             BIGINT NOT NULL,
	application      TEXT COLLATE "C" NOT NULL DEFAULT '',
	service          TEXT COLLATE "C" NOT NULL DEFAULT '',
	release_channel  TEXT COLLATE "C" NOT NULL DEFAULT '',
	desired_state_id TEXT COLLATE "C" NOT NULL DEFAULT '',
	type             TEXT NOT NULL DEFAULT '',
	actor            TEXT NOT NULL DEFAULT '',
	message          TEXT NOT NULL DEFAULT '',
	data             BYTEA
);
CREATE INDEX events_service ON events (application, service, seq);

-- task_runs: the commands runtimes ran for an instance, with their output
-- (BYTEA: command output need not be UTF-8). RecordRun keeps the newest 200
-- per (application, service, release_channel, kind); the index serves that
-- pruning and listing newest first.
CREATE TABLE task_runs (
	id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	application     TEXT COLLATE "C" NOT NULL,
	service         TEXT COLLATE "C" NOT NULL,
	release_channel TEXT COLLATE "C" NOT NULL,
	runtime         TEXT    NOT NULL DEFAULT '',
	kind            TEXT COLLATE "C" NOT NULL,
	version         TEXT    NOT NULL DEFAULT '',
	command         TEXT[],
	exit_code       BIGINT  NOT NULL DEFAULT 0,
	error           TEXT    NOT NULL DEFAULT '',
	started_at      BIGINT  NOT NULL,
	finished_at     BIGINT  NOT NULL,
	stdout          BYTEA   NOT NULL DEFAULT '',
	stderr          BYTEA   NOT NULL DEFAULT '',
	truncated       BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX task_runs_instance_kind ON task_runs (application, service, release_channel, kind, id DESC);

-- processes: the commands running on a host, one row from a command's start
-- until its process group is gone; handle is opaque to the store.
CREATE TABLE processes (
	id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	application     TEXT NOT NULL DEFAULT '',
	service         TEXT NOT NULL DEFAULT '',
	release_channel TEXT NOT NULL DEFAULT '',
	runtime         TEXT NOT NULL DEFAULT '',
	kind            TEXT NOT NULL,
	version         TEXT NOT NULL DEFAULT '',
	command         TEXT[],
	handle          BYTEA  NOT NULL,
	started_at      BIGINT NOT NULL
);

-- leases: one row per key ever claimed. token only grows (a release keeps the
-- row with expires in the past), so a new holder always gets a higher token
-- than every earlier one and fenced writes can compare tokens.
CREATE TABLE leases (
	key     TEXT COLLATE "C" PRIMARY KEY,
	owner   TEXT   NOT NULL,
	token   BIGINT NOT NULL,
	expires BIGINT NOT NULL
);

-- tasks: work enqueued with the plan that decides it, claimed by runners.
-- payload is opaque to the store.
CREATE TABLE tasks (
	id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	key         TEXT COLLATE "C" NOT NULL,
	instance    TEXT COLLATE "C" NOT NULL DEFAULT '',
	kind        TEXT   NOT NULL,
	payload     BYTEA,
	status      TEXT   NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
	owner       TEXT   NOT NULL DEFAULT '',
	token       BIGINT NOT NULL DEFAULT 0,
	attempts    BIGINT NOT NULL DEFAULT 0,
	expires     BIGINT,
	created_at  BIGINT NOT NULL,
	claimed_at  BIGINT,
	finished_at BIGINT,
	message     TEXT   NOT NULL DEFAULT ''
);
-- At most one open task per key and instance.
CREATE UNIQUE INDEX tasks_open_instance ON tasks (key, instance) WHERE status IN ('pending', 'running');
-- Claims look at open tasks, oldest first.
CREATE INDEX tasks_open ON tasks (id) WHERE status IN ('pending', 'running');
CREATE INDEX tasks_key ON tasks (key, instance, id);

-- observations: what the engine last saw of each instance; body is the
-- observation as JSON (without key and since).
CREATE TABLE observations (
	application     TEXT COLLATE "C" NOT NULL,
	service         TEXT COLLATE "C" NOT NULL,
	release_channel TEXT COLLATE "C" NOT NULL,
	body            BYTEA  NOT NULL,
	since           BIGINT NOT NULL,
	PRIMARY KEY (application, service, release_channel)
);

-- runtime_facts: what each runtime reported about its backend; body is the
-- facts as JSON (without runtime and time).
CREATE TABLE runtime_facts (
	runtime     TEXT COLLATE "C" PRIMARY KEY,
	body        BYTEA  NOT NULL,
	observed_at BIGINT NOT NULL
);
