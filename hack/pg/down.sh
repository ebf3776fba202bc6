#!/usr/bin/env bash
# Stops a server hack/pg/up.sh started and removes its data: hack/pg/down.sh [STATE_DIR]
# (default $DROVER_PG_STATE).
set -euo pipefail
state="${1:-${DROVER_PG_STATE:?usage: hack/pg/down.sh STATE_DIR (or set DROVER_PG_STATE)}}"
pgbin="${DROVER_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
as=()
if [[ "$(id -u)" -eq 0 ]]; then as=(runuser -u postgres --); fi
if [[ -f "${state}/data/postmaster.pid" ]]; then
	"${as[@]}" "${pgbin}/pg_ctl" -D "${state}/data" -m fast -w stop >/dev/null || true
fi
rm -rf "${state}"
