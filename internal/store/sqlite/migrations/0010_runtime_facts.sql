-- 0010: what each runtime reported about its backend (store.RuntimeFacts):
-- a Kubernetes cluster's version and API versions, which pushes render Helm
-- charts against. body is the facts as JSON (without runtime and time).
CREATE TABLE runtime_facts (
	runtime     TEXT PRIMARY KEY,
	body        BLOB NOT NULL,
	observed_at TEXT NOT NULL
) WITHOUT ROWID;
