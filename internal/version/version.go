// Package version holds the drover version, stamped at build time with
// -ldflags "-X github.com/drover-dev/drover/internal/version.Version=...",
// and the commit it was built from, read from the build's VCS stamp.
package version

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
)

// Version is the release version, or "dev" for local builds.
var Version = "dev"

// Commit and Date are the commit and its time (RFC 3339), for builds
// without the Go toolchain's VCS stamp (-buildvcs=false, or a tree without
// its .git): -ldflags "-X .../version.Commit=... -X .../version.Date=...".
// The VCS stamp wins when there is one; without either, a Version made by
// git describe (the Makefile's) names the commit.
var (
	Commit = ""
	Date   = ""
)

// Build is what a binary knows of its origin.
type Build struct {
	// Version is the release version (Version), or the module's version
	// when built with go install MODULE@VERSION, else "dev".
	Version string `json:"version"`
	// Commit is the full commit hash ("" when unknown), Date its commit
	// time, and Modified whether the tree had changes not committed.
	Commit   string `json:"commit,omitempty"`
	Date     string `json:"date,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Info reads the binary's build information.
func Info() Build {
	b := Build{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := info.Main.Version; b.Version == "dev" && v != "" && v != "(devel)" {
		b.Version = v
	}
	var vcs Build
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			vcs.Commit = s.Value
		case "vcs.time":
			vcs.Date = s.Value
		case "vcs.modified":
			vcs.Modified, _ = strconv.ParseBool(s.Value)
		}
	}
	switch {
	case vcs.Commit != "":
		b.Commit, b.Date, b.Modified = vcs.Commit, vcs.Date, vcs.Modified
	case b.Commit == "":
		b.Commit, b.Modified = describedCommit(b.Version)
	}
	return b
}

// describeRE is what git describe --tags --always --dirty prints (the
// Makefile's VERSION): a tag, commits since it and the abbreviated hash
// (v1.2.0-3-g0123abc), or the hash alone; -dirty when the tree was modified.
var describeRE = regexp.MustCompile(`^(?:.+-\d+-g)?([0-9a-f]{7,40})(-dirty)?$`)

// describedCommit is the commit a version made by git describe names,
// "" for another version (a bare tag says no more than itself).
func describedCommit(v string) (commit string, modified bool) {
	m := describeRE.FindStringSubmatch(v)
	if m == nil {
		return "", false
	}
	return m[1], m[2] != ""
}

// String is the version with the short commit, its date and whether the
// tree was modified: "v1.2.0 (commit 0123abcd4567, 2026-12-01T10:00:00Z,
// modified)".
func (b Build) String() string {
	s := b.Version
	if b.Commit == "" {
		return s + " (commit unknown)"
	}
	commit := b.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	s += " (commit " + commit
	if b.Date != "" {
		s += ", " + b.Date
	}
	if b.Modified {
		s += ", modified"
	}
	return s + ")"
}
