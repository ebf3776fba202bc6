-- 0007: what the engine last saw of each instance (store.Observation), so
-- that what people read comes from the store and never from a runtime.
-- body is the observation as JSON (without key and since).
CREATE TABLE observations (
	application     TEXT NOT NULL,
	service         TEXT NOT NULL,
	release_channel TEXT NOT NULL,
	body            BLOB NOT NULL,
	since           TEXT NOT NULL,
	PRIMARY KEY (application, service, release_channel)
) WITHOUT ROWID;
