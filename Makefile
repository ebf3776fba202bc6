# drover build and developer entry points. `make` (or `make help`) lists the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules
.DELETE_ON_ERROR:
.SUFFIXES:

GO ?= go
BIN_DIR := $(CURDIR)/bin
MODULE := github.com/drover-dev/drover

# Version stamped into the binary; override with `make build VERSION=v1.2.3`.
# Evaluated once, so that every command of one make run stamps the same version.
ifndef VERSION
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
# Build tags of every build of drover: make build, dist, test and e2e (and the e2e tests'
# own build of the binary, test/e2e/main_test.go), lint, and the Dockerfile; a test
# (test/e2e/build_test.go) checks that they agree. kustomize_disable_go_plugin_support drops
# kustomize's loader of Go plugins (.so files), which drover never uses (it runs kustomize
# with its builtin plugins only): linking the standard library's plugin package makes the
# linker export every symbol dynamically, ~18 MB of a cgo build.
BUILD_TAGS := kustomize_disable_go_plugin_support
# -s -w: no symbol table and no DWARF (for a debugger, `go build -tags $(BUILD_TAGS) ./cmd/drover`).
LDFLAGS := -s -w -X $(MODULE)/internal/version.Version=$(VERSION)
# The release platforms of `make dist` (GOOS/GOARCH, built with CGO_ENABLED=0).
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# The SBOM generator of `make dist`, run from the Go module proxy at this version.
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
# Flags of `drover dev` in `make dev`, e.g. DEVFLAGS='--listen 127.0.0.1:7421'.
DEVFLAGS ?=

# Extra flags appended to `go test` in `make test`, e.g. TESTFLAGS='-run TestCompile -v'.
TESTFLAGS ?=
# How long each fuzz target runs in `make fuzz`.
FUZZTIME ?= 10m
# Fuzzing workers per target (`-parallel`); each is a process of its own.
FUZZPARALLEL ?= 1
# Memory cap of each fuzzing process: virtual memory (ulimit -v, KiB) and the
# Go runtime's soft limit. A target that needs more is a finding.
FUZZ_ULIMIT_KB ?= 4000000
FUZZ_GOMEMLIMIT ?= 1GiB
# Benchmark filter for `make bench`.
BENCH ?= .
# Extra flags for `golangci-lint run`, e.g. LINTFLAGS=--fix.
LINTFLAGS ?=

# golangci-lint is pinned; bump deliberately (newest v2 release that builds with our Go).
GOLANGCI_VERSION ?= v2.15.0
GOLANGCI_LINT := $(BIN_DIR)/golangci-lint

.PHONY: help
help: ## Show this help
	@echo 'Usage: make <target> [VAR=value ...]'
	@echo
	@echo 'Targets:'
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_.-]+:[^#]*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo 'Variables: VERSION=$(VERSION) TESTFLAGS=$(TESTFLAGS) FUZZTIME=$(FUZZTIME) BENCH=$(BENCH) GOLANGCI_VERSION=$(GOLANGCI_VERSION)'

.PHONY: build
build: ## Build bin/drover: stripped, with BUILD_TAGS and the version stamped in
	$(GO) build -trimpath -tags $(BUILD_TAGS) -ldflags "$(LDFLAGS)" -o bin/drover ./cmd/drover

.PHONY: dev
dev: build ## Build bin/drover, then run bin/drover dev (DEVFLAGS appended)
	bin/drover dev $(DEVFLAGS)

.PHONY: dist
dist: ## Release archives for PLATFORMS in dist/: drover, LICENSE, README.md; a CycloneDX SBOM each; SHA256SUMS
	VERSION='$(VERSION)' BUILD_TAGS='$(BUILD_TAGS)' MODULE='$(MODULE)' CYCLONEDX_GOMOD_VERSION='$(CYCLONEDX_GOMOD_VERSION)' GO='$(GO)' \
		bash hack/dist.sh dist $(PLATFORMS)

.PHONY: dist-check
dist-check: ## make dist for this machine's platform only, then verify it (hack/distcheck: checksums, archive contents, build flags, SBOM against the binary)
	@$(MAKE) --no-print-directory dist VERSION='$(VERSION)' PLATFORMS="$$($(GO) env GOOS)/$$($(GO) env GOARCH)"
	$(GO) run ./hack/distcheck -tags $(BUILD_TAGS) -version '$(VERSION)' dist

.PHONY: test
test: ## Run all tests with the race detector (what CI runs); TESTFLAGS are appended
	@# The Kubernetes tests need the local control plane's binaries; the first build takes ~10 minutes (cached after).
	bash hack/kube/build.sh
	@# -timeout: the end-to-end package runs about ten minutes on two CPUs with the race detector.
	$(GO) test -race -tags $(BUILD_TAGS) -count=1 -timeout 30m ./... $(TESTFLAGS)

.PHONY: e2e
e2e: ## Run the end-to-end and Kubernetes end-to-end tests (builds the local cluster binaries first if needed)
	bash hack/kube/build.sh
	$(GO) test -race -tags $(BUILD_TAGS) -count=1 -timeout 30m ./test/e2e/... ./internal/runtimes/kubernetes/... $(TESTFLAGS)

.PHONY: kube-up
kube-up: ## Start the local Kubernetes test cluster (hack/kube/up.sh; state dir: DROVER_KUBE_STATE, default /tmp/drover-kube)
	bash hack/kube/up.sh

.PHONY: kube-down
kube-down: ## Stop the local Kubernetes test cluster started by kube-up
	bash hack/kube/down.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 10m) each, memory-capped (not part of test)
	@targets="$$($(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ {names = names " " $$1; next} $$1 == "ok" {if (names != "") print $$2 names; names = ""}')"; \
	if [[ -z "$$targets" ]]; then echo 'fuzz: no fuzz targets found'; exit 0; fi; \
	while read -r pkg names; do \
		for name in $$names; do \
			echo "==> $$pkg $$name ($(FUZZTIME), -parallel $(FUZZPARALLEL), ulimit -v $(FUZZ_ULIMIT_KB), GOMEMLIMIT=$(FUZZ_GOMEMLIMIT))"; \
			( ulimit -v $(FUZZ_ULIMIT_KB) && GOMEMLIMIT=$(FUZZ_GOMEMLIMIT) \
				$(GO) test -tags $(BUILD_TAGS) -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) -parallel=$(FUZZPARALLEL) "$$pkg" ) || exit 1; \
		done; \
	done <<< "$$targets"

# The fuzz targets CI runs for a short budget each (package:Target): the wire of agents
# and the parsers and renderers of what users and agents send the server. The budget is
# a count of executions, not a time: a -fuzztime duration races Go's fuzzing coordinator
# (golang/go#75804, unfixed in Go 1.26), which then fails a target with a bare "context
# deadline exceeded" and no input.
FUZZ_CI_TARGETS ?= ./internal/runtimes/remote:FuzzHubDecode ./internal/compiler:FuzzRender \
	./internal/compiler:FuzzParams ./internal/usertext:FuzzUser ./internal/config:FuzzDecode \
	./internal/manifest:FuzzDecode ./internal/runtimes/custom:FuzzParseOutput
FUZZ_CI_EXECS ?= 10000

.PHONY: fuzz-ci
fuzz-ci: ## Run FUZZ_CI_TARGETS for FUZZ_CI_EXECS (default 10000) executions each, memory-capped (what CI runs after the tests)
	@for t in $(FUZZ_CI_TARGETS); do \
		pkg="$${t%%:*}"; name="$${t##*:}"; \
		echo "==> $$pkg $$name ($(FUZZ_CI_EXECS) executions)"; \
		( ulimit -v $(FUZZ_ULIMIT_KB) && GOMEMLIMIT=$(FUZZ_GOMEMLIMIT) \
			$(GO) test -tags $(BUILD_TAGS) -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZ_CI_EXECS)x -parallel=$(FUZZPARALLEL) "$$pkg" ) || exit 1; \
	done

.PHONY: bench
bench: ## Run benchmarks matching BENCH (default: all) with allocation stats
	$(GO) test -tags $(BUILD_TAGS) -run='^$$' -bench='$(BENCH)' -benchmem ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint (installed into bin/ on demand)
	$(GOLANGCI_LINT) run --build-tags $(BUILD_TAGS) $(LINTFLAGS) ./...

.PHONY: golangci-lint
golangci-lint: ## Install the pinned golangci-lint into bin/ if missing or of another version
	@if [[ "$$($(GOLANGCI_LINT) version --short 2>/dev/null || true)" != "$(GOLANGCI_VERSION:v%=%)" ]]; then \
		echo "installing golangci-lint $(GOLANGCI_VERSION) into bin/"; \
		rm -f $(GOLANGCI_LINT); \
		GOBIN=$(BIN_DIR) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION); \
	fi

.PHONY: generate
generate: ## Run go generate
	$(GO) generate ./...

# Formats tracked and new (not ignored) Go files; testdata may hold deliberately odd Go.
.PHONY: fmt
fmt: ## Format Go files with gofmt -s
	@git ls-files -z --cached --others --exclude-standard -- '*.go' ':!:**/testdata/**' \
		| while IFS= read -r -d '' f; do if [[ -f "$$f" ]]; then printf '%s\0' "$$f"; fi; done \
		| xargs -0 -r gofmt -s -w

.PHONY: tidy
tidy: ## Run go mod tidy
	$(GO) mod tidy

.PHONY: verify
verify: ## Prove the tree is clean: tidy, generate, fmt leave no diff; then lint and test
	@$(MAKE) --no-print-directory tidy
	@$(MAKE) --no-print-directory generate
	@$(MAKE) --no-print-directory fmt
	@if [[ -n "$$(git status --porcelain)" ]]; then \
		echo 'verify: the tree is not clean after tidy/generate/fmt (or has uncommitted changes):'; \
		git status --porcelain; \
		git --no-pager diff --stat; \
		exit 1; \
	fi
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory test

.PHONY: clean
clean: ## Remove build outputs (bin/, dist/, coverage files)
	rm -rf bin dist coverage.out coverage.html
