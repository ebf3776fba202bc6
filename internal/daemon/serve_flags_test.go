package daemon

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestProgramRootFlags: --program-root and its older name append to one
// list, in the order given.
func TestProgramRootFlags(t *testing.T) {
	var roots []string
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	registerProgramRoots(fl, &roots, "")
	if err := fl.Parse([]string{"--program-root", "a", "--terraform-module-root", "b", "--program-root", "c"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(roots, []string{"a", "b", "c"}) {
		t.Errorf("roots %v, want [a b c]", roots)
	}
}
