// Package version holds the drover version, stamped at build time with
// -ldflags "-X github.com/drover-dev/drover/internal/version.Version=...".
package version

// Version is the release version, or "dev" for local builds.
var Version = "dev"
