// Package archtest guards drover's architecture: import arrows that must
// never exist (Rules), checked on the transitive imports `go list -deps`
// shows, by a test that fails `make test` and names the rule and one chain
// of imports that breaks it.
package archtest
