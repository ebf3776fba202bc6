-- 0018: notifications (store.Notifications). notify_targets are where
-- notifications go: a webhook or an application's Slack channel, with a
-- filter kept as one column a list (",a,b,"; '' matches everything) and the
-- kind's settings in spec, sealed (a webhook's secret). notify_deliveries is
-- the outbox: one row an event and target, written in the transaction that
-- appends the event; claimed by a sender (owner, claimed_until), delivered
-- or retried at next_at, dead after the most attempts. key orders the
-- deliveries of one target: one service's go one at a time, in order.
CREATE TABLE notify_targets (
	name           TEXT NOT NULL PRIMARY KEY,
	kind           TEXT NOT NULL,
	f_types        TEXT NOT NULL DEFAULT '',
	f_applications TEXT NOT NULL DEFAULT '',
	f_services     TEXT NOT NULL DEFAULT '',
	f_channels     TEXT NOT NULL DEFAULT '',
	f_statuses     TEXT NOT NULL DEFAULT '',
	spec           BLOB,
	source         TEXT NOT NULL DEFAULT '',
	created_by     TEXT NOT NULL DEFAULT '',
	created_at     TEXT NOT NULL
);
CREATE TABLE notify_deliveries (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	target        TEXT    NOT NULL,
	key           TEXT    NOT NULL,
	type          TEXT    NOT NULL,
	event_seq     INTEGER NOT NULL,
	state         TEXT    NOT NULL,
	attempts      INTEGER NOT NULL DEFAULT 0,
	next_at       TEXT    NOT NULL,
	last_error    TEXT    NOT NULL DEFAULT '',
	owner         TEXT    NOT NULL DEFAULT '',
	claimed_until TEXT,
	created_at    TEXT    NOT NULL,
	delivered_at  TEXT
);
CREATE INDEX notify_deliveries_queue ON notify_deliveries (state, target, key, id);
CREATE INDEX notify_deliveries_due ON notify_deliveries (state, next_at);
CREATE INDEX notify_deliveries_event ON notify_deliveries (event_seq);
