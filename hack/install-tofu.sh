#!/usr/bin/env bash
# install-tofu.sh [BIN_DIR]: make sure a terraform-compatible binary exists for
# the terraform runner's tests (internal/runtimes/terraform).
#
#   - terraform or tofu already on PATH: nothing to do.
#   - BIN_DIR/tofu already built at the pinned version: nothing to do.
#   - otherwise build OpenTofu $TOFU_VERSION from the Go module proxy into
#     BIN_DIR/tofu (default BIN_DIR: ~/.cache/drover-ci/bin).
#
# There is no terraform package on Debian or npm, and terraform itself cannot be
# built from the module proxy (its go.mod replaces nested modules the proxy does
# not serve). OpenTofu can, inside a copy of its module (`go install` refuses
# modules with replace directives). A cold build takes ~7 minutes, ~2 GB of RAM
# and ~3 GB of module and build cache; GOMODCACHE and GOCACHE are honoured, so
# CI's caches make later builds fast, and the binary itself is kept in BIN_DIR.
# Add BIN_DIR to PATH (after the system directories) to use it.
set -euo pipefail

# Pinned; bump deliberately. Its go.mod needs go >= 1.24.13.
TOFU_VERSION="${TOFU_VERSION:-v1.10.10}"
TOFU_MODULE="github.com/opentofu/opentofu"

bin_dir="${1:-${HOME}/.cache/drover-ci/bin}"

for name in terraform tofu; do
	if path="$(command -v "${name}")"; then
		echo "--- ${name} found at ${path}: $("${path}" version 2>/dev/null | sed -n 1p); not building OpenTofu"
		exit 0
	fi
done

want="${TOFU_VERSION#v}"
if [[ -x "${bin_dir}/tofu" ]] && "${bin_dir}/tofu" version 2>/dev/null | sed -n 1p | grep -qF "v${want}"; then
	echo "--- OpenTofu ${TOFU_VERSION} already built at ${bin_dir}/tofu"
	exit 0
fi

if ! command -v go >/dev/null 2>&1; then
	echo "install-tofu.sh: go is required to build OpenTofu" >&2
	exit 1
fi

echo "--- building OpenTofu ${TOFU_VERSION} from the Go module proxy into ${bin_dir}/tofu (several minutes when the caches are cold)"
echo "    GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE)"
work="$(mktemp -d)"
cleanup() {
	chmod -R u+w "${work}" 2>/dev/null || true
	rm -rf "${work}"
}
trap cleanup EXIT

# Download outside any module, so no go.mod is touched; -json reports where the
# module's files are.
src_dir="$(cd "${work}" && go mod download -json "${TOFU_MODULE}@${TOFU_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [[ -z "${src_dir}" || ! -d "${src_dir}" ]]; then
	echo "install-tofu.sh: go mod download did not report the module directory of ${TOFU_MODULE}@${TOFU_VERSION}" >&2
	exit 1
fi
echo "    source: ${src_dir}"

# The module cache is read-only: build in a writable copy, where the module's own
# replace directive (hashicorp/hcl/v2 => opentofu/hcl/v2) applies.
cp -R "${src_dir}" "${work}/src"
chmod -R u+w "${work}/src"
mkdir -p "${bin_dir}"
(
	cd "${work}/src"
	go build -trimpath -ldflags "-s -w -X ${TOFU_MODULE}/version.dev=no" -o "${bin_dir}/tofu.tmp" ./cmd/tofu
)
mv -f "${bin_dir}/tofu.tmp" "${bin_dir}/tofu"
echo "--- built: $("${bin_dir}/tofu" version | sed -n 1p)"
