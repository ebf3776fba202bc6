#!/usr/bin/env bash
# hack/kube/build.sh [--check]: build the binaries of drover's local Kubernetes test cluster from
# the Go module proxy into ${DROVER_KUBE_CACHE:-$HOME/.cache/drover-kube}/bin:
#
#   etcd                     go.etcd.io/etcd/server/v3, the version k8s.io/kubernetes pins (3.5.21)
#   kube-apiserver           k8s.io/kubernetes $KUBE_VERSION (v1.33.13)
#   kube-controller-manager  "
#   kube-scheduler           "
#   kwok                     sigs.k8s.io/kwok $KWOK_VERSION (v0.7.0; built on the k8s 1.33 libraries)
#   kwok-stages/             kwok's own Stage files for that version (hack/kube/up.sh loads them)
#   VERSION                  the stamp; written last, so a missing or different stamp means "rebuild"
#
# Idempotent: when every binary exists and VERSION matches, it only says so (well under a second).
# Cold, on 2 cores, it takes about 10 minutes (~130 MB of module downloads, ~3.5 GB of Go build cache,
# ~340 MB of binaries); with a warm Go build cache about 30 s.
#
# `go install k8s.io/kubernetes/cmd/...@version` is refused because kubernetes' go.mod replaces its
# staging modules (k8s.io/api, k8s.io/client-go, ...) with ./staging paths. So this script generates
# a small tool module under the cache dir (never inside the repository) that requires
# k8s.io/kubernetes and points each staging module at its published v0.MINOR.PATCH tag.
#
# The build settings are fixed (CGO_ENABLED=0, -trimpath, the ldflags below): changing any of them
# invalidates the whole Go build cache. GOMODCACHE and GOCACHE are honoured when set (CI points them
# at ~/.cache/drover-ci/...); otherwise Go's defaults are used. Concurrent runs are serialised with a
# lock in the cache dir, so several test binaries may call this at once.
#
#   --check   exit 0 when the binaries are up to date, 1 when a build is needed; builds nothing
#
# Environment: DROVER_KUBE_CACHE (see above); KUBE_VERSION and KWOK_VERSION override the pins
# (a different version is a different stamp, so it rebuilds).
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.33.13}"
KWOK_VERSION="${KWOK_VERSION:-v0.7.0}"
# Bump when the way the binaries are built changes, so cached binaries are rebuilt.
RECIPE=1

cache="${DROVER_KUBE_CACHE:-${HOME}/.cache/drover-kube}"
bin="${cache}/bin"
stamp="drover-kube recipe=${RECIPE} kubernetes=${KUBE_VERSION} kwok=${KWOK_VERSION} $(go env GOOS 2>/dev/null || echo unknown)/$(go env GOARCH 2>/dev/null || echo unknown)"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

log() { printf '[kube-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

up_to_date() {
	[[ -f "${bin}/VERSION" ]] && [[ "$(sed -n 1p "${bin}/VERSION")" == "${stamp}" ]] || return 1
	local b
	for b in "${binaries[@]}"; do [[ -x "${bin}/${b}" ]] || return 1; done
	[[ -d "${bin}/kwok-stages" ]]
}

case "${1:-}" in
--check)
	up_to_date && exit 0
	exit 1
	;;
"") ;;
*) die "usage: $0 [--check]" ;;
esac

command -v go >/dev/null 2>&1 || die "go is not on PATH"
mkdir -p "${cache}" "${bin}"

# One build at a time per cache dir: `go test ./...` may start several test binaries that all
# need the cluster. The later ones wait here and then find the binaries built.
if command -v flock >/dev/null 2>&1; then
	exec 9>"${cache}/.build.lock"
	if ! flock -n 9; then
		log "another build is running in ${cache}; waiting for it"
		flock 9
	fi
fi

if up_to_date; then
	log "binaries up to date in ${bin} (${stamp})"
	exit 0
fi

start=${SECONDS}
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off
# A -mod setting (e.g. -mod=vendor) from the environment would break the generated modules.
GOFLAGS="$(printf '%s' "${GOFLAGS:-$(go env GOFLAGS)}" | sed -E 's/(^|[[:space:]])-mod=[^[:space:]]*//g')"
export GOFLAGS
gomodcache="$(go env GOMODCACHE)"
gocache="$(go env GOCACHE)"
log "building Kubernetes ${KUBE_VERSION} and kwok ${KWOK_VERSION} into ${bin}"
log "this takes ~10 minutes on 2 cores with cold caches, ~30 s with a warm Go build cache"
log "GOMODCACHE=${gomodcache} GOCACHE=${gocache}"

# Anything older is removed first: a half-written bin dir must never pass as complete.
rm -f "${bin}/VERSION"
work="${bin}/.work"
rm -rf "${work}"
mkdir -p "${work}"

# module_field MODULE@VERSION FIELD: a field of `go mod download -json`, run outside any module.
module_field() {
	local out
	out="$(cd "${work}" && go mod download -json "$1")" || die "go mod download $1 failed (is the Go module proxy reachable?)"
	printf '%s\n' "${out}" | sed -n "s/^[[:space:]]*\"$2\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p"
}

# ---------------------------------------------------------------- Kubernetes + etcd
src="${cache}/src/kubernetes-${KUBE_VERSION}"
mkdir -p "${src}"
kube_gomod="$(module_field "k8s.io/kubernetes@${KUBE_VERSION}" GoMod)"
[[ -f "${kube_gomod}" ]] || die "could not fetch the go.mod of k8s.io/kubernetes@${KUBE_VERSION}"
staging_version="v0.${KUBE_VERSION#v1.}"
replaces="$(grep -E '^[[:space:]]*k8s\.io/[^[:space:]]+[[:space:]]+=>[[:space:]]+\./staging/' "${kube_gomod}" |
	awk -v v="${staging_version}" '{printf "\t%s => %s %s\n", $1, $1, v}')"
[[ -n "${replaces}" ]] || die "found no ./staging replace directives in ${kube_gomod}; has the layout changed?"
{
	printf '// Generated by drover hack/kube/build.sh; rebuilt when it changes. Do not edit.\n'
	printf 'module drover.dev/kube-tools\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n%s\n)\n' \
		"${KUBE_VERSION}" "${replaces}"
} >"${work}/go.mod.want"
# Regenerate only when the wanted go.mod changed; `go build -mod=mod` completes go.mod and go.sum.
if ! cmp -s "${work}/go.mod.want" "${src}/go.mod.generated"; then
	cp "${work}/go.mod.want" "${src}/go.mod"
	cp "${work}/go.mod.want" "${src}/go.mod.generated"
	rm -f "${src}/go.sum"
fi
cat >"${src}/tools.go" <<'EOF'
//go:build tools

// Package tools pins the commands hack/kube/build.sh builds.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
EOF

minor="${KUBE_VERSION#v1.}"
minor="${minor%%.*}"
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}"
kube_ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
kube_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
kube_ldflags+=" -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

build_in_src() { # name package ldflags
	local t0=${SECONDS}
	log "building $1 ($2)"
	(cd "${src}" && go build -mod=mod -trimpath -ldflags "$3" -o "${work}/$1" "$2") >&2 ||
		die "building $1 failed (output above)"
	log "built $1 in $((SECONDS - t0))s"
}

# The apiserver first: it is the bulk of a cold build; the others mostly reuse its packages.
build_in_src kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${kube_ldflags}"
build_in_src kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${kube_ldflags}"
build_in_src kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "${kube_ldflags}"
etcd_version="$(cd "${src}" && go list -mod=mod -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)" ||
	die "could not resolve the etcd version k8s.io/kubernetes ${KUBE_VERSION} requires"
build_in_src etcd go.etcd.io/etcd/server/v3 "-s -w"

# ---------------------------------------------------------------- kwok
# sigs.k8s.io/kwok has no replace directives, so `go install module@version` works as is.
t0=${SECONDS}
log "building kwok ${KWOK_VERSION} (sigs.k8s.io/kwok/cmd/kwok)"
GOBIN="${work}/kwok-bin" go install -trimpath \
	-ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" >&2 || die "building kwok failed (output above)"
mv "${work}/kwok-bin/kwok" "${work}/kwok"
log "built kwok in $((SECONDS - t0))s"

# kwok's own Stage files of this version. Passing any pod Stage to kwok replaces all of its
# built-in pod stages, so up.sh passes the built-in ones explicitly; copied here because the module
# cache may be cleaned later.
kwok_dir="$(module_field "sigs.k8s.io/kwok@${KWOK_VERSION}" Dir)"
[[ -d "${kwok_dir}/kustomize/stage" ]] || die "no kustomize/stage in the kwok module at ${kwok_dir}"
mkdir -p "${work}/kwok-stages"
for f in pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete \
	pod/chaos/pod-container-running-failed node/fast/node-initialize node/heartbeat/node-heartbeat; do
	[[ -f "${kwok_dir}/kustomize/stage/${f}.yaml" ]] || die "kwok ${KWOK_VERSION} has no stage ${f}.yaml"
	cp "${kwok_dir}/kustomize/stage/${f}.yaml" "${work}/kwok-stages/"
done
chmod -R u+w "${work}/kwok-stages"
# kwok's heartbeat comes every 20-25 s; the controller-manager marks a node Unknown after 50 s
# without one (and its pods NotReady for good). Under a loaded CI machine that margin is too thin,
# so heartbeat every 10-12 s.
sed -i -e 's/durationMilliseconds: 20000$/durationMilliseconds: 10000/' \
	-e 's/jitterDurationMilliseconds: 25000$/jitterDurationMilliseconds: 12000/' "${work}/kwok-stages/node-heartbeat.yaml"
grep -q "jitterDurationMilliseconds: 12000" "${work}/kwok-stages/node-heartbeat.yaml" ||
	die "kwok ${KWOK_VERSION}'s node-heartbeat stage has an unexpected delay; adjust build.sh"

# ---------------------------------------------------------------- check and install
got="$("${work}/kube-apiserver" --version 2>&1)" || die "the new kube-apiserver does not run: ${got}"
[[ "${got}" == "Kubernetes ${KUBE_VERSION}" ]] || die "kube-apiserver reports '${got}', want 'Kubernetes ${KUBE_VERSION}'"
got="$("${work}/etcd" --version 2>&1 | sed -n 's/^etcd Version: //p')"
[[ "v${got}" == "${etcd_version}" ]] || die "etcd reports version '${got}', want ${etcd_version}"
"${work}/kwok" --version >/dev/null 2>&1 || die "the new kwok does not run"

for b in "${binaries[@]}"; do mv -f "${work}/${b}" "${bin}/${b}"; done
rm -rf "${bin}/kwok-stages"
mv "${work}/kwok-stages" "${bin}/kwok-stages"
rm -rf "${work}"
{
	echo "${stamp}"
	echo "etcd=${etcd_version} go=$(go env GOVERSION) built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$((SECONDS - start))"
} >"${bin}/VERSION"
log "done in $((SECONDS - start))s: $(du -sh "${bin}" | cut -f1) of binaries in ${bin}"
