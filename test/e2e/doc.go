// Package e2e holds drover's end-to-end tests: they build the real drover
// binary once, run `drover server` as a separate process on a private data
// directory and address, and drive it through the CLI the way a user would
// (apply, push, status, approve, wait, events, ...). Servers are killed with
// SIGKILL and restarted on the same data directory to check durability.
//
// Run them with `go test -race -count=1 ./test/e2e/`; `-short` skips them.
// When the tests are built with -race the server binary is built with -race
// too, and a data race reported by a server fails the test that ran it
// (set DROVER_E2E_RACE=0 to build the server without it; DROVER_E2E_BIN=PATH
// tests a prebuilt binary instead of building one).
package e2e
