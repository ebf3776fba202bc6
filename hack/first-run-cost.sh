#!/usr/bin/env bash
# Measures what a newcomer's first `go run ./cmd/drover dev` costs: the time from the
# command to "staging converged", the peak memory of the build, and the disk the Go
# module and build caches take, starting from empty caches (the README's "first run"
# numbers come from here). The load average is printed with the numbers: on a shared
# machine it explains them.
#
#   bash hack/first-run-cost.sh [WORKDIR]
#
# WORKDIR (default: a new temporary directory) receives the caches, the data directory and
# the logs; it is left in place for a look, remove it after. The server listens on a free
# loopback port and is stopped with SIGINT once staging converged.
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in /usr/bin/time python3 bc setsid; do
	if ! command -v "${tool}" >/dev/null 2>&1; then
		echo "first-run-cost: needs ${tool} (Debian: apt-get install time python3 bc util-linux)" >&2
		exit 1
	fi
done
work="${1:-$(mktemp -d -t drover-first-run-XXXXXX)}"
mkdir -p "${work}"/{gocache,gomodcache,data,config}
if [[ -n "$(find "${work}/gocache" "${work}/gomodcache" -mindepth 1 -print -quit)" ]]; then
	echo "first-run-cost: ${work} holds caches already; give an empty or new directory" >&2
	exit 1
fi
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
out="${work}/dev.out"

echo "first-run-cost: load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; go: $(go version)"
start="$(date +%s.%N)"
# setsid: the go command and the drover it starts share a process group of their own,
# which gets the SIGINT a Ctrl-C would send.
setsid env GOCACHE="${work}/gocache" GOMODCACHE="${work}/gomodcache" GOFLAGS=-modcacherw \
	XDG_CONFIG_HOME="${work}/config" \
	/usr/bin/time -v -o "${work}/time.txt" \
	go run ./cmd/drover dev --listen "127.0.0.1:${port}" --data "${work}/data" >"${out}" 2>&1 &
pid=$!
loads=()
next=0
while ! grep -q 'converged  *staging' "${out}"; do
	if ! kill -0 "${pid}" 2>/dev/null; then
		echo "first-run-cost: go run exited before staging converged:" >&2
		tail -20 "${out}" >&2
		exit 1
	fi
	now="$(date +%s)"
	if ((now >= next)); then
		loads+=("$(cut -d' ' -f1 /proc/loadavg)")
		next=$((now + 30))
	fi
	sleep 0.5
done
end="$(date +%s.%N)"
kill -INT -- "-${pid}"
wait "${pid}" || true

elapsed="$(echo "${end} - ${start}" | bc)"
echo "first-run-cost: staging converged ${elapsed}s after go run started"
echo "first-run-cost: load average (1 min) every 30s: ${loads[*]}; after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -E 'Maximum resident set size|Elapsed \(wall clock\)|User time|System time' "${work}/time.txt" | sed 's/^\t*/first-run-cost: /'
echo "first-run-cost: modules downloaded: $(find "${work}/gomodcache/cache/download" -name '*.zip' | wc -l)"
du -sh "${work}/gomodcache" "${work}/gocache" | sed 's/^/first-run-cost: cache /'
