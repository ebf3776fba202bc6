#!/usr/bin/env bash
# Puts axe-core's browser script (the accessibility rules the web UI's browser tests run,
# test/e2e/web_test.go) in DIR/axe-core-VERSION/axe.min.js, fetched once from the npm
# registry as a tarball and checked against its pinned SHA-512 (no npm needed). Prints
# the script's path. axe-core is MPL-2.0; its LICENSE is kept beside the script.
set -euo pipefail

dir="${1:?usage: install-axe.sh DIR}"
version="4.14.1"
sha512="1477dafa598d8d065f273d6af302aa203c02e83131707b7fa648cd41bd3d6b734f8c22a0dab86ee6a6f64b8afbe804b214d36db85a2826965edfb3a0b9d546b5"
dest="${dir}/axe-core-${version}"

if [[ -f "${dest}/axe.min.js" ]]; then
	echo "${dest}/axe.min.js"
	exit 0
fi
mkdir -p "${dir}"
tmp="$(mktemp -d "${dir}/.axe.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
curl -fsSL --retry 3 -o "${tmp}/axe.tgz" "https://registry.npmjs.org/axe-core/-/axe-core-${version}.tgz"
got="$(sha512sum "${tmp}/axe.tgz" | cut -d' ' -f1)"
if [[ "${got}" != "${sha512}" ]]; then
	echo "axe-core-${version}.tgz: SHA-512 ${got}, want ${sha512}" >&2
	exit 1
fi
tar -xzf "${tmp}/axe.tgz" -C "${tmp}" package/axe.min.js package/LICENSE
mkdir -p "${tmp}/out"
mv "${tmp}/package/axe.min.js" "${tmp}/package/LICENSE" "${tmp}/out/"
rm -rf "${dest}"
mv "${tmp}/out" "${dest}"
echo "${dest}/axe.min.js"
