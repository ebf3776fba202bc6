#!/usr/bin/env bash
# Records test/corpus/*/expected.yaml again with the pinned upstream tools:
# each case's corpus.yaml `command` is run in its directory with helm and
# kustomize built from the Go module proxy at the versions below (cached
# under ~/.cache/drover-ci/corpus-tools). Usage: hack/corpus/record.sh [CASE...]
set -euo pipefail

HELM_VERSION=v3.20.2        # helm.sh/helm/v3, the version drover renders charts with
KUSTOMIZE_VERSION=v5.8.2    # sigs.k8s.io/kustomize/kustomize/v5: kustomize/api v0.21.2, as drover

root=$(cd "$(dirname "$0")/../.." && pwd)
tools=${DROVER_CORPUS_TOOLS:-$HOME/.cache/drover-ci/corpus-tools}
mkdir -p "$tools"
if [[ ! -x $tools/helm-$HELM_VERSION ]]; then
	GOBIN=$tools go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	mv "$tools/helm" "$tools/helm-$HELM_VERSION"
fi
if [[ ! -x $tools/kustomize-$KUSTOMIZE_VERSION ]]; then
	GOBIN=$tools go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
	mv "$tools/kustomize" "$tools/kustomize-$KUSTOMIZE_VERSION"
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
ln -s "$tools/helm-$HELM_VERSION" "$bin/helm"
ln -s "$tools/kustomize-$KUSTOMIZE_VERSION" "$bin/kustomize"

cd "$root/test/corpus"
cases=("$@")
if [[ ${#cases[@]} -eq 0 ]]; then
	cases=(*/)
fi
for c in "${cases[@]}"; do
	c=${c%/}
	cmd=$(sed -n 's/^command: *//p' "$c/corpus.yaml")
	if [[ -z $cmd ]]; then
		echo "$c: no command in corpus.yaml" >&2
		exit 1
	fi
	echo "$c: $cmd"
	(cd "$c" && PATH="$bin:$PATH" bash -c "$cmd")
done
