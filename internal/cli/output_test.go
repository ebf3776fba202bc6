package cli

import (
	"strings"
	"testing"
)

// TestYAMLWhereJSONIsSaysWhatToUse: -o yaml on a command that prints json
// is a usage error (64) that says which formats it prints and where yaml is.
func TestYAMLWhereJSONIsSaysWhatToUse(t *testing.T) {
	t.Parallel()
	code, _, stderr := runMain("status", "-o", "yaml", "--server", noServer)
	if code != exitUsage || !strings.Contains(stderr, "-o yaml: this command prints text or json") || !strings.Contains(stderr, "drover compile") {
		t.Errorf("status -o yaml: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runMain("status", "-o", "xml", "--server", noServer)
	if code != exitUsage || !strings.Contains(stderr, `invalid output format "xml": use text or json`) {
		t.Errorf("status -o xml: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestEveryChangeHasJSON: each command that changes something offers -o
// json (rollback aside: its own command).
func TestEveryChangeHasJSON(t *testing.T) {
	t.Parallel()
	root := NewRoot(nil, nil)
	for _, name := range []string{"push", "apply", "approve", "reject", "bypass", "pause", "resume", "wait", "version", "status"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Fatalf("no command %s: %v", name, err)
		}
		f := c.Flags().Lookup("output")
		if f == nil || !strings.Contains(f.Usage, "json") || f.Shorthand != "o" {
			t.Errorf("drover %s has no -o json", name)
		}
	}
}

// TestLocalCommandsHideConnectionFlags: validate, compile and version read
// no server, so their help leaves out --server and the like; the others
// keep them.
func TestLocalCommandsHideConnectionFlags(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"validate", "compile", "version"} {
		code, stdout, stderr := runMain(name, "--help")
		if code != exitOK || strings.Contains(stdout, "--server") || strings.Contains(stdout, "--token") || !strings.Contains(stdout, "Usage:") {
			t.Errorf("drover %s --help: exit %d\n%s%s", name, code, stdout, stderr)
		}
	}
	code, stdout, _ := runMain("status", "--help")
	if code != exitOK || !strings.Contains(stdout, "--server") {
		t.Errorf("drover status --help should list --server:\n%s", stdout)
	}
	// Twice in one process (the help func puts itself back).
	for range 2 {
		if _, stdout, _ := runMain("validate", "--help"); strings.Contains(stdout, "--server") {
			t.Errorf("drover validate --help lists --server:\n%s", stdout)
		}
	}
}
