#!/usr/bin/env bash
# hack/kube/down.sh [STATE_DIR]: stop the cluster hack/kube/up.sh started in STATE_DIR (default
# ${DROVER_KUBE_STATE:-/tmp/drover-kube}). It stops exactly the processes recorded in
# STATE_DIR/pids (and up.sh's watchdog, if any), newest first: SIGTERM, SIGKILL after 10 s, and
# waits until they have exited. A recorded pid is only signalled while its start time still matches,
# so a reused pid is never hit. Nothing is deleted: certificates, logs and the kubeconfig stay.
# Safe to run when nothing is running.
set -euo pipefail

kube_script=down
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${here}/lib.sh"

state="${1:-${DROVER_KUBE_STATE:-/tmp/drover-kube}}"
if [[ ! -d "${state}" ]]; then
	kube_log "no state dir ${state}; nothing to stop"
	exit 0
fi
state="$(cd "${state}" && pwd)"
lock_state "${state}"

# The watchdog first, so it does not start a second down.sh meanwhile; unless it is our parent:
# it runs this script when its owner exits.
stop_recorded "${state}/watchdog" "${PPID}"
if [[ -s "${state}/pids" ]]; then
	stop_recorded "${state}/pids"
	kube_log "cluster in ${state} stopped"
else
	kube_log "nothing running in ${state}"
fi
