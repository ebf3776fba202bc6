#!/usr/bin/env bash
# Builds drover's release archives: `make dist` runs it with the Makefile's variables.
#
#   VERSION=v1.2.3 BUILD_TAGS=… MODULE=… CYCLONEDX_GOMOD_VERSION=v… bash hack/dist.sh OUTDIR GOOS/GOARCH...
#
# OUTDIR is emptied first. For each platform it holds
#   drover_VERSION_GOOS_GOARCH.tar.gz    drover_VERSION_GOOS_GOARCH/{drover,LICENSE,README.md}
#   drover_VERSION_GOOS_GOARCH.cdx.json  a CycloneDX SBOM (JSON) of the modules linked into
#                                        that binary, from the module graph (cyclonedx-gomod app)
# and, for all of them, SHA256SUMS (sha256sum's format). Binaries are static (CGO_ENABLED=0:
# the embedded store is modernc.org/sqlite, pure Go), stripped, built with -trimpath and
# BUILD_TAGS; archives are reproducible for a commit (file times are the commit's, owners 0,
# names sorted, gzip without a timestamp). `make dist-check` verifies the result.
set -euo pipefail

: "${VERSION:?VERSION is not set (make dist sets it)}"
: "${BUILD_TAGS:?BUILD_TAGS is not set (make dist sets it)}"
: "${MODULE:?MODULE is not set (make dist sets it)}"
: "${CYCLONEDX_GOMOD_VERSION:?CYCLONEDX_GOMOD_VERSION is not set (make dist sets it)}"
GO="${GO:-go}"

if (($# < 2)); then
	echo "usage: hack/dist.sh OUTDIR GOOS/GOARCH..." >&2
	exit 64
fi
out="$1"
shift
if [[ "${VERSION}" == */* || "${VERSION}" == *[[:space:]]* ]]; then
	echo "dist: VERSION ${VERSION@Q} would not make a file name" >&2
	exit 64
fi

cd "$(dirname "$0")/.."
root="$(pwd)"
rm -rf "${out}"
mkdir -p "${out}"
out="$(cd "${out}" && pwd)"
stage="$(mktemp -d -t drover-dist-XXXXXX)"
trap 'rm -rf "${stage}"' EXIT

# File times in the archives: the commit's (SOURCE_DATE_EPOCH wins), so two builds of one
# commit give the same bytes.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
ldflags="-s -w -X ${MODULE}/internal/version.Version=${VERSION}"
# The SBOM generator, pinned, from the Go module proxy: built for this machine (a `go run`
# under a cross GOOS would build it for the target), into the stage directory.
echo "dist: cyclonedx-gomod ${CYCLONEDX_GOMOD_VERSION}"
GOOS= GOARCH= CGO_ENABLED=0 GOBIN="${stage}/bin" \
	"${GO}" install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@${CYCLONEDX_GOMOD_VERSION}"
cyclonedx="${stage}/bin/cyclonedx-gomod"
# It reads the main module's version from git with go-git, which cannot open a linked
# worktree (there .git is a file): then it reads a clone of HEAD, whose go.mod and go.sum
# must be the ones built (distcheck compares the SBOM with the binary).
sbom_src="${root}"
if [[ "$(git rev-parse --git-dir 2>/dev/null)" != "$(git rev-parse --git-common-dir 2>/dev/null)" ]]; then
	if ! git diff --quiet HEAD -- go.mod go.sum; then
		echo "dist: go.mod or go.sum differ from HEAD in this worktree; commit them first (the SBOM is made from a clone of HEAD)" >&2
		exit 1
	fi
	git clone -q --no-checkout "${root}" "${stage}/src"
	git -C "${stage}/src" checkout -q --detach "$(git rev-parse HEAD)"
	sbom_src="${stage}/src"
fi

for platform in "$@"; do
	goos="${platform%/*}"
	goarch="${platform#*/}"
	if [[ -z "${goos}" || -z "${goarch}" || "${platform}" != */* ]]; then
		echo "dist: platform ${platform@Q} is not GOOS/GOARCH" >&2
		exit 64
	fi
	name="drover_${VERSION}_${goos}_${goarch}"
	dir="${stage}/${name}"
	mkdir -p "${dir}"
	echo "dist: ${name}"
	CGO_ENABLED=0 GOOS="${goos}" GOARCH="${goarch}" \
		"${GO}" build -trimpath -tags "${BUILD_TAGS}" -ldflags "${ldflags}" -o "${dir}/drover" ./cmd/drover
	cp LICENSE README.md "${dir}/"
	chmod 0755 "${dir}/drover"
	chmod 0644 "${dir}/LICENSE" "${dir}/README.md"
	tar -C "${stage}" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${epoch}" \
		-cf - "${name}" | gzip -n -9 >"${out}/${name}.tar.gz"

	# The SBOM of what this binary links: cyclonedx-gomod's app mode lists the modules of
	# the main package's dependencies for this GOOS/GOARCH and these tags (GOFLAGS).
	# -licenses reads each module's license file from the module cache.
	CGO_ENABLED=0 GOOS="${goos}" GOARCH="${goarch}" GOFLAGS="${GOFLAGS:+${GOFLAGS} }-tags=${BUILD_TAGS}" \
		"${cyclonedx}" app -json -licenses -main cmd/drover \
		-output "${out}/${name}.cdx.json" "${sbom_src}"
done

(
	cd "${out}"
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum -- *.tar.gz *.cdx.json >SHA256SUMS
	else
		shasum -a 256 -- *.tar.gz *.cdx.json >SHA256SUMS
	fi
)
echo "dist: wrote $(find "${out}" -maxdepth 1 -type f | wc -l) files to ${out}:"
ls -l "${out}"
