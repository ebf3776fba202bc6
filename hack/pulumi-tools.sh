#!/usr/bin/env bash
# pulumi-tools.sh [OUT_DIR]: build what the Pulumi runner's tests need, from the
# Go module proxy only, into OUT_DIR (default ~/.cache/drover-ci/pulumi-$PULUMI_VERSION):
#
#   pulumi                     the CLI (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
#   pulumi-language-yaml       the YAML language host (github.com/pulumi/pulumi-yaml)
#   pulumi-resource-drovertest drover's test provider (hack/pulumi-testprovider):
#                              resources that write files on this machine, so a
#                              stack needs no cloud and drift can be made by hand
#
# Put OUT_DIR first on PATH (pulumi finds the language host and the provider
# there) or set DROVER_PULUMI_BIN=OUT_DIR/pulumi. A warm run checks a stamp and
# exits; a cold one takes ~15 minutes on two cores (the CLI links every state
# backend's SDK). GOMODCACHE and GOCACHE are honoured.
#
# `go install github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@V` is refused: pkg's
# go.mod replaces sdk/v3 with ../sdk. So the module is copied out of the module
# cache, the replace is dropped for sdk/v3 at the same version, and the CLI is
# built there.
set -euo pipefail

PULUMI_VERSION="${PULUMI_VERSION:-v3.274.1}"
PULUMI_YAML_VERSION="${PULUMI_YAML_VERSION:-v1.25.0}"

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-${HOME}/.cache/drover-ci/pulumi-${PULUMI_VERSION}}"
provider_sum="$(cd "${here}/pulumi-testprovider" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)"
stamp="pulumi ${PULUMI_VERSION} yaml ${PULUMI_YAML_VERSION} provider ${provider_sum}"
if [[ -f "${out}/stamp" && "$(cat "${out}/stamp")" == "${stamp}" && -x "${out}/pulumi" && -x "${out}/pulumi-language-yaml" && -x "${out}/pulumi-resource-drovertest" ]]; then
	echo "--- Pulumi tools already built in ${out} (${stamp})"
	exit 0
fi

echo "--- building Pulumi ${PULUMI_VERSION}, pulumi-yaml ${PULUMI_YAML_VERSION} and the test provider into ${out} (~15 minutes when the caches are cold)"
mkdir -p "${out}"
rm -f "${out}/stamp"
work="$(mktemp -d)"
cleanup() {
	chmod -R u+w "${work}" 2>/dev/null || true
	rm -rf "${work}"
}
trap cleanup EXIT
export GOWORK=off
# The CLI is built in a copy whose go.mod this script edits, hence -mod=mod
# there; the test provider's go.mod and go.sum are the repository's, used
# as they are.
copy_flags="${GOFLAGS:-} -mod=mod"

moddir() {
	(cd "${work}" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
}

if [[ ! -x "${out}/pulumi" ]] || ! "${out}/pulumi" version 2>/dev/null | grep -qxF "${PULUMI_VERSION}"; then
	src="$(moddir "github.com/pulumi/pulumi/pkg/v3@${PULUMI_VERSION}")"
	[[ -d "${src}" ]] || { echo "pulumi-tools.sh: no module directory for pulumi/pkg/v3@${PULUMI_VERSION}" >&2; exit 1; }
	cp -R "${src}" "${work}/pkg"
	chmod -R u+w "${work}/pkg"
	(
		cd "${work}/pkg"
		go mod edit -dropreplace github.com/pulumi/pulumi/sdk/v3 -require "github.com/pulumi/pulumi/sdk/v3@${PULUMI_VERSION}"
		GOFLAGS="${copy_flags}" go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=${PULUMI_VERSION}" \
			-o "${out}/pulumi.tmp" ./cmd/pulumi
	)
	mv -f "${out}/pulumi.tmp" "${out}/pulumi"
fi

# The stamp names the versions: a stamp that differs rebuilds the
# language host too (it has no version flag to check).
if [[ ! -x "${out}/pulumi-language-yaml" || "$(cat "${out}/yaml-version" 2>/dev/null)" != "${PULUMI_YAML_VERSION}" ]]; then
	GOBIN="${work}/bin" GOFLAGS="${copy_flags}" go install -trimpath -ldflags "-s -w" "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml@${PULUMI_YAML_VERSION}"
	mv -f "${work}/bin/pulumi-language-yaml" "${out}/pulumi-language-yaml"
	echo "${PULUMI_YAML_VERSION}" >"${out}/yaml-version"
fi

(cd "${here}/pulumi-testprovider" && go build -trimpath -ldflags "-s -w" -o "${out}/pulumi-resource-drovertest.tmp" .)
mv -f "${out}/pulumi-resource-drovertest.tmp" "${out}/pulumi-resource-drovertest"

echo "${stamp}" > "${out}/stamp"
echo "--- built: pulumi $("${out}/pulumi" version), $(ls "${out}")"
