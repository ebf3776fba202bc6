#!/usr/bin/env bash
# hack/kube/up.sh [STATE_DIR]: start drover's local Kubernetes test cluster and print the path of
# its admin kubeconfig as the last (only) line of stdout. Progress goes to stderr.
#
# It runs a real control plane, all on 127.0.0.1 with free ports picked at start:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler (Kubernetes v1.33.13)
#   kwok, which simulates 2 nodes (kwok-node-0, kwok-node-1): pods scheduled onto them turn
#   Running and Ready at once, so Deployments roll out; pods owned by a Job then Succeed, so Jobs
#   complete. No containers run.
# It returns once the nodes are Ready and the default ServiceAccount exists (~6-8 s with the
# binaries cached). Binaries come from hack/kube/build.sh, which it runs first (a no-op when they
# are cached; ~10 minutes on a cold machine).
#
# STATE_DIR (default ${DROVER_KUBE_STATE:-/tmp/drover-kube}) holds:
#   kubeconfig    admin credentials (group system:masters: everything, including GET /metrics)
#   cluster.env   server URL, ports and file paths as shell variables (DROVER_KUBE_*)
#   pids          "name pid starttime" of every process started; hack/kube/down.sh stops them
#   pki/          CA, serving and client certificates (openssl; kept across restarts)
#   logs/         one log per process
#   etcd/         the etcd data; emptied on every fresh start
#
# Idempotent: when the cluster recorded in STATE_DIR is up and healthy, it only prints the
# kubeconfig path again; a partly running one is stopped and started afresh.
#
# Simulated failures, by pod label (see hack/kube/kwok/):
#   drover.dev/simulate: not-ready                            Running, never Ready (stalls rollouts)
#   pod-container-running-failed.stage.kwok.x-k8s.io: "true"  fails with exit code 1 (for Jobs)
#   drover.dev/exit-code: "N"                                 ends with exit code N (Jobs; with the
#                                                             annotations drover.dev/exit-delay and
#                                                             drover.dev/termination-message)
# and by service account:
#   drover-podexec                                            stays Running until labelled with an
#                                                             exit code (a test runs its command)
#
# Environment (optional):
#   DROVER_KUBE_CACHE        where build.sh keeps the binaries (default ~/.cache/drover-kube)
#   DROVER_KUBE_NODES        number of simulated nodes (default 2)
#   DROVER_KUBE_KWOK_STAGES  extra kwok Stage files, space separated
#   DROVER_KUBE_OWNER_PID    stop the cluster (run down.sh) when this process exits; used by the
#                            Go test helper so a crashed or timed-out test binary leaks nothing
# Needs: go (for the build), openssl, curl, flock and setsid (util-linux).
set -euo pipefail

kube_script=up
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${here}/lib.sh"
die() {
	kube_log "ERROR: $*"
	exit 1
}

state="${1:-${DROVER_KUBE_STATE:-/tmp/drover-kube}}"
cache="${DROVER_KUBE_CACHE:-${HOME}/.cache/drover-kube}"
bin="${cache}/bin"
nodes="${DROVER_KUBE_NODES:-2}"
host=127.0.0.1 # the only address anything listens on

for tool in openssl curl base64 flock setsid; do
	command -v "${tool}" >/dev/null 2>&1 || die "${tool} is required (Debian: apt-get install openssl curl coreutils util-linux)"
done
[[ -d /proc/self ]] || die "needs Linux (/proc)"

mkdir -p "${state}"
state="$(cd "${state}" && pwd)"
chmod 700 "${state}"
lock_state "${state}"

pki="${state}/pki"
logs="${state}/logs"
kubeconfig="${state}/kubeconfig"
pids="${state}/pids"
envfile="${state}/cluster.env"
mkdir -p "${pki}" "${logs}"

# ------------------------------------------------------------------------- binaries
bash "${here}/build.sh" >&2 || die "hack/kube/build.sh failed"

# api PATH [curl args...]: a request to the apiserver as the admin user.
api() {
	local path=$1
	shift
	curl -fsS --max-time 5 --cacert "${pki}/ca.crt" --cert "${pki}/admin.crt" --key "${pki}/admin.key" \
		"$@" "https://${host}:${api_port}${path}"
}
readyz() { [[ "$(api /readyz 2>/dev/null)" == ok ]]; }

# ------------------------------------------------------------------------- already up?
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
if [[ -s "${pids}" ]]; then
	healthy=true
	for name in "${components[@]}"; do
		pid="" start=""
		read -r _ pid start < <(grep "^${name} " "${pids}" || true) || true
		proc_is "${pid:-}" "${start:-}" || healthy=false
	done
	api_port="$(sed -n 's/^DROVER_KUBE_APISERVER_PORT=//p' "${envfile}" 2>/dev/null || true)"
	if [[ "${healthy}" == true && -n "${api_port}" && -s "${kubeconfig}" ]] && readyz; then
		kube_log "already running (state in ${state})"
		echo "${kubeconfig}"
		exit 0
	fi
	kube_log "found a stopped or partly running cluster in ${state}; stopping what is left of it"
	stop_recorded "${state}/watchdog"
	stop_recorded "${pids}"
fi
: >"${pids}"
: >"${state}/watchdog"

# ------------------------------------------------------------------------- watchdog
# With DROVER_KUBE_OWNER_PID, a watchdog runs down.sh once that process has exited. It starts
# before any component, so an owner that dies while this script still runs (a test binary hitting
# its timeout) leaks nothing either: down.sh waits for the state lock, then stops what was started.
if [[ -n "${DROVER_KUBE_OWNER_PID:-}" ]]; then
	owner_start="$(proc_starttime "${DROVER_KUBE_OWNER_PID}")" || die "DROVER_KUBE_OWNER_PID ${DROVER_KUBE_OWNER_PID} is not running"
	# Polls the owner once a second; when it is gone, runs down.sh (which leaves its parent, the
	# watchdog, alone) and, with DROVER_KUBE_PURGE_ON_OWNER_EXIT=1 (the Go helper's temporary
	# state dirs), removes the state dir.
	purge="${DROVER_KUBE_PURGE_ON_OWNER_EXIT:-0}"
	# shellcheck disable=SC2016 # expanded by the watchdog's bash, from its arguments
	DROVER_KUBE_LOCKED='' setsid bash -c '
		source "$1"
		while proc_is "$2" "$3"; do sleep 1; done
		bash "$4" "$5" || exit 1
		if [[ "$6" == 1 && "$5" == /?* && -f "$5/pids" && -d "$5/pki" ]]; then
			rm -rf "$5" && echo "removed $5"
		fi
	' drover-kube-watchdog "${here}/lib.sh" "${DROVER_KUBE_OWNER_PID}" "${owner_start}" "${here}/down.sh" "${state}" "${purge}" \
		>"${logs}/watchdog.log" 2>&1 </dev/null 9>&- &
	echo "watchdog $! $(proc_starttime $!)" >"${state}/watchdog"
	kube_log "watchdog (pid $!) stops the cluster when pid ${DROVER_KUBE_OWNER_PID} exits"
fi

# On failure, stop whatever was started, so a failed start leaves nothing running.
on_exit() {
	local rc=$?
	if ((rc != 0)); then
		kube_log "start-up failed; stopping what was started (logs kept in ${logs})"
		stop_recorded "${pids}"
		stop_recorded "${state}/watchdog"
	fi
}
trap on_exit EXIT
trap "exit 130" INT TERM HUP

# ------------------------------------------------------------------------- certificates
if [[ ! -s "${pki}/front-proxy-client.crt" ]]; then
	kube_log "generating certificates in ${pki}"
	(
		set -e
		cd "${pki}"
		rm -f ./*
		new_ca() { # name common-name
			openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$2" -keyout "$1.key" -out "$1.crt" \
				-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
		}
		new_cert() { # name subject ca extensions-file
			openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr"
			openssl x509 -req -days 3650 -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial -extfile "$4" -out "$1.crt"
			rm -f "$1.csr"
		}
		cat >serving.ext <<-'EOF'
			basicConstraints=CA:FALSE
			keyUsage=critical,digitalSignature,keyEncipherment
			extendedKeyUsage=serverAuth
			subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
		EOF
		cat >client.ext <<-'EOF'
			basicConstraints=CA:FALSE
			keyUsage=critical,digitalSignature,keyEncipherment
			extendedKeyUsage=clientAuth
		EOF
		new_ca ca drover-kube-ca
		new_cert apiserver /CN=kube-apiserver ca serving.ext
		# system:masters: full access without RBAC rules; used by tests, the controllers and kwok.
		new_cert admin "/O=system:masters/CN=drover-kube-admin" ca client.ext
		# Request-header authentication for aggregated APIs; without it the controller-manager and
		# the scheduler keep logging about a missing requestheader-client-ca-file.
		new_ca front-proxy-ca drover-kube-front-proxy-ca
		new_cert front-proxy-client /CN=front-proxy-client front-proxy-ca client.ext
		# ServiceAccount token signing keys.
		openssl genrsa -out sa.key 2048
		openssl rsa -in sa.key -pubout -out sa.pub
		chmod 600 ./*.key
	) >"${logs}/openssl.log" 2>&1 || die "openssl failed; see ${logs}/openssl.log"
fi

# ------------------------------------------------------------------------- ports
# Ports in use: LISTEN sockets (state 0A) from /proc/net/tcp{,6}, as decimal numbers.
used_ports() {
	local f
	for f in /proc/net/tcp /proc/net/tcp6; do
		[[ -r "${f}" ]] && awk 'NR > 1 && $4 == "0A" {split($2, a, ":"); print a[2]}' "${f}"
	done | while read -r hex; do echo $((16#${hex})); done
}
# pick_ports N: N distinct free ports in 20000-32767 (below Linux' ephemeral range, so outgoing
# connections do not take them meanwhile). Another process may still grab one before we bind
# it; start_cluster detects that and retries with new ports.
pick_ports() {
	local -A taken=()
	local p picked=()
	# Seed per call: subshells may repeat the parent's sequence, and a retry must not repeat a pick.
	RANDOM=$(((BASHPID << 16) ^ 10#$(date +%N)))
	while read -r p; do taken[${p}]=1; done < <(used_ports)
	while ((${#picked[@]} < $1)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 12768))
		[[ -z "${taken[${p}]:-}" ]] || continue
		taken[${p}]=1
		picked+=("${p}")
	done
	echo "${picked[@]}"
}

# ------------------------------------------------------------------------- processes
t0=$(date +%s%N)
elapsed() { echo "$((($(date +%s%N) - t0) / 1000000))" | awk '{printf "%.1fs", $1 / 1000}'; }

# start NAME BINARY ARGS...: run in the background in its own session, record pid and start time.
# fd 9 (the state lock) is closed for the child, or the lock would live as long as the cluster.
start() {
	local name=$1 exe=$2 pid start
	shift 2
	setsid "${exe}" "$@" >"${logs}/${name}.log" 2>&1 </dev/null 9>&- &
	pid=$!
	start="$(proc_starttime "${pid}")" || die "${name} exited at once; see ${logs}/${name}.log"
	echo "${name} ${pid} ${start}" >>"${pids}"
	kube_log "started ${name} (pid ${pid})"
}

# A component exited during start-up. Returns 2 (retry) when it lost a port race, else dies.
died() {
	local name=$1
	if grep -qi 'address already in use' "${logs}/${name}.log" 2>/dev/null; then
		kube_log "${name} lost a port to another process; retrying with other ports"
		return 2
	fi
	kube_log "${name} exited during start-up; last lines of ${logs}/${name}.log:"
	tail -n 25 "${logs}/${name}.log" >&2 || true
	die "${name} failed to start"
}

# wait_until WHAT TIMEOUT COMMAND...: poll COMMAND every 0.2 s; fail early when a process died.
wait_until() {
	local what=$1 timeout=$2 deadline line name pid start
	shift 2
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		while read -r name pid start; do
			proc_is "${pid}" "${start}" || {
				died "${name}"
				return $?
			}
		done <"${pids}"
		((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for ${what} (logs in ${logs})"
		sleep 0.2
	done
	kube_log "${what}: ok after $(elapsed)"
}

node_json() { # name
	cat <<-EOF
		{"apiVersion": "v1", "kind": "Node",
		 "metadata": {"name": "$1",
		   "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		   "labels": {"type": "kwok", "kubernetes.io/hostname": "$1", "kubernetes.io/os": "linux",
		              "kubernetes.io/arch": "amd64", "node-role.kubernetes.io/agent": ""}},
		 "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
		            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}}
	EOF
}
# The apiserver's JSON lists conditions as {"type":...,"status":...,...}, in struct order.
nodes_ready() {
	[[ "$(api "/api/v1/nodes?labelSelector=type%3Dkwok&pretty=false" | grep -o '"type":"Ready","status":"True"' | wc -l)" -ge "${nodes}" ]]
}

write_kubeconfig() {
	local ca cert key
	ca="$(base64 -w0 <"${pki}/ca.crt")"
	cert="$(base64 -w0 <"${pki}/admin.crt")"
	key="$(base64 -w0 <"${pki}/admin.key")"
	# JSON is valid kubeconfig (YAML) and lets tests read it with encoding/json.
	cat >"${kubeconfig}.tmp" <<-EOF
		{
		  "apiVersion": "v1",
		  "kind": "Config",
		  "clusters": [{"name": "drover-kube", "cluster": {"server": "https://${host}:${api_port}", "certificate-authority-data": "${ca}"}}],
		  "users": [{"name": "drover-kube-admin", "user": {"client-certificate-data": "${cert}", "client-key-data": "${key}"}}],
		  "contexts": [{"name": "drover-kube", "context": {"cluster": "drover-kube", "user": "drover-kube-admin", "namespace": "default"}}],
		  "current-context": "drover-kube"
		}
	EOF
	chmod 600 "${kubeconfig}.tmp"
	mv "${kubeconfig}.tmp" "${kubeconfig}"
}

kwok_args() {
	local f
	printf 'apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {}\n' >"${state}/kwok.yaml"
	# An explicit --config keeps kwok from reading ~/.kwok/kwok.yaml. Any pod Stage given replaces
	# kwok's built-in pod stages, so the built-in "fast" ones are passed explicitly.
	kwok_cfg=(--config="${state}/kwok.yaml")
	# shellcheck disable=SC2086 # DROVER_KUBE_KWOK_STAGES is a space separated list
	for f in "${bin}"/kwok-stages/{pod-ready,pod-complete,pod-delete,pod-container-running-failed,node-initialize,node-heartbeat}.yaml \
		"${here}"/kwok/{pod-not-ready,pod-exit-code,pod-run-on-host}.yaml ${DROVER_KUBE_KWOK_STAGES:-}; do
		[[ -f "${f}" ]] || die "missing kwok stage file ${f}"
		kwok_cfg+=(--config="${f}")
	done
}

# start_cluster: one attempt with fresh ports; returns 2 when a port was lost to another process.
start_cluster() {
	read -r etcd_port etcd_peer_port api_port kcm_port sched_port kwok_port <<<"$(pick_ports 6)"
	write_kubeconfig
	cat >"${envfile}" <<-EOF
		DROVER_KUBE_SERVER=https://${host}:${api_port}
		DROVER_KUBE_APISERVER_PORT=${api_port}
		DROVER_KUBE_ETCD_PORT=${etcd_port}
		DROVER_KUBE_ETCD_PEER_PORT=${etcd_peer_port}
		DROVER_KUBE_CONTROLLER_MANAGER_PORT=${kcm_port}
		DROVER_KUBE_SCHEDULER_PORT=${sched_port}
		DROVER_KUBE_KWOK_PORT=${kwok_port}
		DROVER_KUBE_KUBECONFIG=${kubeconfig}
		DROVER_KUBE_CA=${pki}/ca.crt
		DROVER_KUBE_CLIENT_CERT=${pki}/admin.crt
		DROVER_KUBE_CLIENT_KEY=${pki}/admin.key
		DROVER_KUBE_VERSION=$(sed -n 1p "${bin}/VERSION")
	EOF

	rm -rf "${state}/etcd"
	start etcd "${bin}/etcd" --name drover-kube --data-dir "${state}/etcd" \
		--listen-client-urls "http://${host}:${etcd_port}" --advertise-client-urls "http://${host}:${etcd_port}" \
		--listen-peer-urls "http://${host}:${etcd_peer_port}" --initial-advertise-peer-urls "http://${host}:${etcd_peer_port}" \
		--initial-cluster "drover-kube=http://${host}:${etcd_peer_port}" --initial-cluster-state new \
		--unsafe-no-fsync --quota-backend-bytes 2147483648
	wait_until "etcd /health" 60 curl -fsS --max-time 2 "http://${host}:${etcd_port}/health" || return $?

	# --endpoint-reconciler-type=none: Endpoints may not hold loopback addresses, so the
	# "kubernetes" Service stays without endpoints (only in-cluster clients would need them).
	start kube-apiserver "${bin}/kube-apiserver" \
		--bind-address="${host}" --advertise-address="${host}" --secure-port="${api_port}" \
		--etcd-servers="http://${host}:${etcd_port}" \
		--cert-dir="${state}/apiserver" \
		--tls-cert-file="${pki}/apiserver.crt" --tls-private-key-file="${pki}/apiserver.key" \
		--client-ca-file="${pki}/ca.crt" \
		--requestheader-client-ca-file="${pki}/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--proxy-client-cert-file="${pki}/front-proxy-client.crt" --proxy-client-key-file="${pki}/front-proxy-client.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="${pki}/sa.pub" --service-account-signing-key-file="${pki}/sa.key" \
		--service-cluster-ip-range=10.96.0.0/16 \
		--authorization-mode=RBAC \
		--endpoint-reconciler-type=none \
		--profiling=false
	wait_until "kube-apiserver /readyz" 180 readyz || return $?

	# --node-monitor-grace-period: kwok heartbeats every 10-12 s; the 50 s default leaves little
	# slack on a busy CI machine before nodes turn Unknown and their pods NotReady.
	start kube-controller-manager "${bin}/kube-controller-manager" \
		--kubeconfig="${kubeconfig}" --authentication-kubeconfig="${kubeconfig}" --authorization-kubeconfig="${kubeconfig}" \
		--bind-address="${host}" --secure-port="${kcm_port}" --cert-dir="${state}/controller-manager" \
		--leader-elect=false \
		--service-account-private-key-file="${pki}/sa.key" --root-ca-file="${pki}/ca.crt" \
		--cluster-signing-cert-file="${pki}/ca.crt" --cluster-signing-key-file="${pki}/ca.key" \
		--node-monitor-grace-period=2m \
		--profiling=false
	start kube-scheduler "${bin}/kube-scheduler" \
		--kubeconfig="${kubeconfig}" --authentication-kubeconfig="${kubeconfig}" --authorization-kubeconfig="${kubeconfig}" \
		--bind-address="${host}" --secure-port="${sched_port}" --cert-dir="${state}/scheduler" \
		--leader-elect=false --profiling=false
	kwok_args
	# --server-address must be set: with it empty kwok may listen on 0.0.0.0.
	start kwok "${bin}/kwok" "${kwok_cfg[@]}" \
		--kubeconfig="${kubeconfig}" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--server-address="${host}:${kwok_port}" \
		--node-ip=10.244.255.1 --cidr=10.244.0.1/16

	wait_until "kube-controller-manager /healthz" 120 curl -fsSk --max-time 2 "https://${host}:${kcm_port}/healthz" || return $?
	wait_until "kube-scheduler /healthz" 120 curl -fsSk --max-time 2 "https://${host}:${sched_port}/healthz" || return $?
	wait_until "kwok /healthz" 120 curl -fsS --max-time 2 "http://${host}:${kwok_port}/healthz" || return $?
	local i
	for ((i = 0; i < nodes; i++)); do
		api /api/v1/nodes -X POST -H 'Content-Type: application/json' --data-binary "$(node_json "kwok-node-${i}")" \
			>/dev/null || die "could not create node kwok-node-${i}"
	done
	wait_until "${nodes} kwok nodes Ready" 120 nodes_ready || return $?
	# Pods are rejected until the ServiceAccount controller has created the namespace's default one.
	wait_until "ServiceAccount default/default" 120 api /api/v1/namespaces/default/serviceaccounts/default || return $?
}

attempt=1
while :; do
	rc=0
	start_cluster || rc=$?
	((rc == 0)) && break
	stop_recorded "${pids}"
	((rc == 2 && attempt < 3)) || die "could not start the cluster"
	attempt=$((attempt + 1))
done

kube_log "cluster up in $(elapsed): export KUBECONFIG=${kubeconfig}"
echo "${kubeconfig}"
