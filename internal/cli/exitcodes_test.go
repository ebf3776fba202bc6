package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// quickstart is the example tree, relative to this package.
var quickstart = filepath.Join("..", "..", "examples", "quickstart") + "/..."

// noServer is an address nothing listens on: a usage error must be found
// before any request is sent.
const noServer = "http://127.0.0.1:1"

// runMain runs the CLI as the binary would and returns its exit code, stdout and stderr.
func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestB16UsageErrorsExit64: every usage error (missing --app, bad flag
// values, wrong argument counts, unknown commands and flags, bad --param
// syntax) exits 64, never 2 (wait's "failed") or 3 (its "timeout").
func TestB16UsageErrorsExit64(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"wait", "web"},
		{"wait"},
		{"wait", "web", "--app", "quickstart", "--timeout", "soon"},
		{"approve", "web", "--app", "quickstart"},
		{"reject", "web"},
		{"push", "web", "--app", "quickstart", "--param", "image"},
		{"push", "web", "--app", "quickstart", "--param", "=1"},
		{"push", "web", "--app", "quickstart", "--param-by-release-channel", "image=1"},
		{"push", "web"},
		{"push", "web", "--bogus"},
		{"status", "web", "--app", "quickstart", "-o", "xml"},
		{"status", "web"},
		{"events", "web"},
		{"pause", "web"},
		{"runs", "web"},
		{"run", "abc"},
		{"run"},
		{"validate"},
		{"validate", quickstart, "-o", "toml"},
		{"compile", quickstart, "--app", "nosuch"},
		{"compile", quickstart, "--param", "image"},
		{"nosuch"},
		{"--bogus"},
		{"version", "extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runMain(append(args, "--server", noServer)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr is not a usage message:\n%s", stderr)
			}
		})
	}
}

// TestB16ExitCodesAreDistinct: the codes the README documents differ.
func TestB16ExitCodesAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for _, c := range []int{exitOK, exitError, exitFailed, exitTimeout, exitUsage} {
		if seen[c] {
			t.Errorf("exit code %d is used twice", c)
		}
		seen[c] = true
	}
	// Help and completion are commands, not usage errors.
	for _, args := range [][]string{{}, {"help"}, {"help", "wait"}, {"wait", "--help"}, {"completion", "bash"}, {"version"}} {
		if code, _, stderr := runMain(args...); code != exitOK {
			t.Errorf("drover %v: exit %d, want 0\n%s", args, code, stderr)
		}
	}
	// A command that fails for a reason other than usage still exits 1.
	if code, _, stderr := runMain("validate", filepath.Join(t.TempDir(), "missing.pvn.yaml")); code != exitError {
		t.Errorf("validate of a missing file: exit %d, want 1\n%s", code, stderr)
	}
}

// TestB13RepeatedParamRefused: a parameter given twice (for every release
// channel, or twice for one) is refused on compile and push; one value for
// all channels plus one per channel is fine.
func TestB13RepeatedParamRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--param", "image=1.0", "--param", "image=2.0"}, `--param: parameter "image" is given more than once`},
		{[]string{"--param", "image=1.0", "--param", "image=1.0"}, `--param: parameter "image" is given more than once`},
		{[]string{"--param-by-release-channel", "staging=image=1.0", "--param-by-release-channel", "staging=image=2.0"}, `--param-by-release-channel: parameter "image" is given more than once for release channel "staging"`},
	} {
		for _, verb := range [][]string{
			{"compile", quickstart, "--app", "quickstart", "--service", "web"},
			{"push", "web", "--app", "quickstart", "--server", noServer},
		} {
			args := append(append([]string{}, verb...), tt.args...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				code, stdout, stderr := runMain(args...)
				if code != exitUsage || !strings.Contains(stderr, tt.want) {
					t.Errorf("exit %d, want %d with %q; stdout:\n%s\nstderr:\n%s", code, exitUsage, tt.want, stdout, stderr)
				}
			})
		}
	}
	code, stdout, stderr := runMain("compile", quickstart, "--app", "quickstart", "--service", "web", "-o", "json",
		"--param", "image=1.0", "--param-by-release-channel", "staging=image=2.0", "--param-by-release-channel", "prod=image=3.0")
	if code != exitOK || !strings.Contains(stdout, "nginx:2.0") || !strings.Contains(stdout, "nginx:3.0") {
		t.Errorf("one value for all plus one per channel: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
