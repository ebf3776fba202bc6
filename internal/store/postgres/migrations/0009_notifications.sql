-- 0009: notifications (store.Notifications), as the SQLite store's
-- migration 0018 keeps them. notify_targets are where notifications go: a
-- webhook or an application's Slack channel, with a filter kept as one
-- column a list (',a,b,'; '' matches everything) and the kind's settings in
-- spec, sealed (a webhook's secret). notify_deliveries is the outbox: one
-- row an event and target, written in the statement that appends the event;
-- claimed by a sender (owner, claimed_until), delivered or retried at
-- next_at, dead after the most attempts. key orders the deliveries of one
-- target: one service's go one at a time, in order. Times are nanoseconds
-- since the Unix epoch.
CREATE TABLE notify_targets (
	name           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	kind           TEXT NOT NULL,
	f_types        TEXT COLLATE "C" NOT NULL DEFAULT '',
	f_applications TEXT COLLATE "C" NOT NULL DEFAULT '',
	f_services     TEXT COLLATE "C" NOT NULL DEFAULT '',
	f_channels     TEXT COLLATE "C" NOT NULL DEFAULT '',
	f_statuses     TEXT COLLATE "C" NOT NULL DEFAULT '',
	spec           BYTEA,
	source         TEXT NOT NULL DEFAULT '',
	created_by     TEXT NOT NULL DEFAULT '',
	created_at     BIGINT NOT NULL
);
CREATE TABLE notify_deliveries (
	id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	target        TEXT COLLATE "C" NOT NULL,
	key           TEXT COLLATE "C" NOT NULL,
	type          TEXT   NOT NULL,
	event_seq     BIGINT NOT NULL,
	state         TEXT   NOT NULL,
	attempts      INTEGER NOT NULL DEFAULT 0,
	next_at       BIGINT NOT NULL,
	last_error    TEXT   NOT NULL DEFAULT '',
	owner         TEXT   NOT NULL DEFAULT '',
	claimed_until BIGINT,
	created_at    BIGINT NOT NULL,
	delivered_at  BIGINT
);
CREATE INDEX notify_deliveries_queue ON notify_deliveries (state, target, key, id);
CREATE INDEX notify_deliveries_due ON notify_deliveries (state, next_at);
CREATE INDEX notify_deliveries_event ON notify_deliveries (event_seq);
