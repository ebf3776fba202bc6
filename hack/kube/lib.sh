# shellcheck shell=bash
# hack/kube/lib.sh: helpers shared by up.sh and down.sh (sourced, not run).
#
# Processes are recorded in STATE_DIR/pids as "name pid starttime" lines. starttime is field 22 of
# /proc/PID/stat (clock ticks since boot), so a recorded PID that the kernel has since reused for
# another process is never signalled. (The executable path is not a safe identity: build.sh may
# replace a binary while a cluster still runs the old one.)

kube_log() { printf '[kube-%s %s] %s\n' "${kube_script:-lib}" "$(date +%H:%M:%S)" "$*" >&2; }

# proc_starttime PID: prints the start time of a live (non-zombie) process, fails otherwise.
proc_starttime() {
	local stat rest
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	rest="${stat##*) }" # the command name in parentheses may contain anything; skip past it
	# shellcheck disable=SC2086 # word splitting of the fields is intended
	set -- ${rest}
	[[ "$1" != Z && "$1" != X ]] || return 1 # zombie/dead: exited, only not reaped yet
	printf '%s\n' "${20}"
}

# proc_is PID STARTTIME: the recorded process still exists.
proc_is() {
	[[ -n "$1" && -n "$2" ]] || return 1
	[[ "$(proc_starttime "$1" 2>/dev/null)" == "$2" ]]
}

# stop_recorded FILE [SKIP_PID]: stop every process recorded in FILE, last started first: SIGTERM,
# then SIGKILL after 10 s; wait until each has exited. Processes are signalled as process groups
# when they lead one (they are started with setsid), so helpers they spawned go too.
stop_recorded() {
	local file=$1 skip=${2:-} lines line name pid start target i
	[[ -s "${file}" ]] || return 0
	mapfile -t lines < <(tac "${file}")
	for line in "${lines[@]}"; do
		read -r name pid start <<<"${line}"
		[[ -n "${pid:-}" && "${pid}" != "${skip}" ]] || continue
		if ! proc_is "${pid}" "${start}"; then
			kube_log "${name} (pid ${pid}) had already exited"
			continue
		fi
		target=${pid}
		if [[ "$(proc_pgid "${pid}")" == "${pid}" ]]; then target=-${pid}; fi
		kill -TERM -- "${target}" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			proc_is "${pid}" "${start}" || break
			sleep 0.1
		done
		if proc_is "${pid}" "${start}"; then
			kube_log "${name} (pid ${pid}) ignored SIGTERM for 10 s; sending SIGKILL"
			kill -KILL -- "${target}" 2>/dev/null || true
			for ((i = 0; i < 50; i++)); do
				proc_is "${pid}" "${start}" || break
				sleep 0.1
			done
		fi
		if proc_is "${pid}" "${start}"; then
			kube_log "WARNING: ${name} (pid ${pid}) is still running"
		else
			kube_log "stopped ${name} (pid ${pid})"
		fi
	done
	: >"${file}"
}

# proc_pgid PID: the process group of PID.
proc_pgid() {
	local stat rest
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	rest="${stat##*) }"
	# shellcheck disable=SC2086
	set -- ${rest}
	printf '%s\n' "$3"
}

# lock_state DIR: serialise up.sh/down.sh on one state dir (fd 9; children must close it).
lock_state() {
	[[ "${DROVER_KUBE_LOCKED:-}" == "$1" ]] && return 0 # already held by our caller
	command -v flock >/dev/null 2>&1 || return 0
	exec 9>"$1/.lock"
	if ! flock -n 9; then
		kube_log "waiting for another up.sh/down.sh on $1"
		flock 9
	fi
	export DROVER_KUBE_LOCKED="$1"
}
