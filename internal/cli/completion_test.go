package cli

import (
	"strings"
	"testing"
)

// TestCompletionRequestsPassTheCommandCheck: the completion scripts ask
// drover __complete ARGS...; Main must hand that to cobra, not refuse it
// as an unknown command (exit 64), and the answer lists the subcommands.
func TestCompletionRequestsPassTheCommandCheck(t *testing.T) {
	t.Parallel()
	for _, req := range []string{"__complete", "__completeNoDesc"} {
		code, stdout, stderr := runMain(req, "st")
		if code != exitOK || !strings.HasPrefix(stdout, "status") || !strings.Contains(stdout, ":4") {
			t.Errorf("drover %s st: exit %d\nstdout:\n%s\nstderr:\n%s", req, code, stdout, stderr)
		}
	}
	code, stdout, _ := runMain("__complete", "status", "-o", "")
	if code != exitOK || !strings.Contains(stdout, "text\njson\n") {
		t.Errorf("drover __complete status -o '': exit %d, %q; want text and json", code, stdout)
	}
	// A server that cannot be reached completes no service, silently.
	code, stdout, stderr := runMain("__complete", "--server", noServer, "push", "")
	if code != exitOK || strings.TrimSpace(stdout) != ":4" {
		t.Errorf("drover __complete push '' without a server: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// Still unknown: a mistyped command.
	if code, _, _ := runMain("__completex"); code != exitUsage {
		t.Errorf("drover __completex: exit %d, want %d", code, exitUsage)
	}
}

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	for usage, want := range map[string]string{
		"output format: text or json":                       "text json",
		"output format: text, yaml or json":                 "text yaml json",
		"output format: text or json (one event a line)":    "text json",
		"write the dump to this file (- = standard output)": "",
	} {
		if got := strings.Join(outputFormats(usage), " "); got != want {
			t.Errorf("outputFormats(%q) = %q, want %q", usage, got, want)
		}
	}
}
