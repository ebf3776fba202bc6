#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on 127.0.0.1 from Debian's postgresql packages, for
# tests and for trying drover's PostgreSQL store by hand (make pg-up):
#
#   eval "$(bash hack/pg/up.sh)"     # exports DATABASE_URL, DROVER_PG_STATE
#   bash hack/pg/down.sh             # stops it and removes its data
#
# Environment: DROVER_PG_PORT (default 55432), DROVER_PG_STATE (data directory; default a new
# temporary one), DROVER_PG_WATCH_PID (stop the server once that process exits: test binaries
# pass their own pid so a crashed test leaves nothing running). As root the server runs as the
# "postgres" user. The server is tuned for tests (fsync off): never keep data in it.
set -euo pipefail

port="${DROVER_PG_PORT:-55432}"
pgbin="${DROVER_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
if [[ -z "${pgbin}" || ! -x "${pgbin}/initdb" ]]; then
	echo "hack/pg/up.sh: PostgreSQL server binaries not found (apt-get install postgresql, or set DROVER_PG_BIN)" >&2
	exit 1
fi
state="${DROVER_PG_STATE:-}"
if [[ -z "${state}" ]]; then
	state="$(mktemp -d "${TMPDIR:-/tmp}/drover-pg.XXXXXX")"
fi
mkdir -p "${state}"
chmod 0755 "${state}"
as=()
if [[ "$(id -u)" -eq 0 ]]; then
	id postgres >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin postgres
	chown postgres: "${state}"
	as=(runuser -u postgres --)
fi
if [[ ! -f "${state}/data/PG_VERSION" ]]; then
	"${as[@]}" "${pgbin}/initdb" -D "${state}/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"${state}/initdb.log" 2>&1 ||
		{ cat "${state}/initdb.log" >&2; exit 1; }
fi
"${as[@]}" "${pgbin}/pg_ctl" -D "${state}/data" -l "${state}/server.log" -w -t 30 \
	-o "-p ${port} -c listen_addresses=127.0.0.1 -k ${state} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
	start >/dev/null || { cat "${state}/server.log" >&2; exit 1; }

if [[ -n "${DROVER_PG_WATCH_PID:-}" ]]; then
	# The watchdog outlives this script (setsid) and stops the server when the watched process is gone.
	setsid bash -c '
		while kill -0 "$1" 2>/dev/null; do sleep 1; done
		'"${as[*]:-}"' "$2/pg_ctl" -D "$3/data" -m immediate stop >/dev/null 2>&1 || true
		rm -rf "$3"
	' watchdog "${DROVER_PG_WATCH_PID}" "${pgbin}" "${state}" </dev/null >/dev/null 2>&1 &
fi

url="postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable"
printf 'DATABASE_URL=%s\nDROVER_PG_STATE=%s\n' "${url}" "${state}" >"${state}/pg.env"
echo "export DATABASE_URL='${url}' DROVER_PG_STATE='${state}'"
