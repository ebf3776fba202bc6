package daemon

import (
	"slices"
	"testing"
)

// TestGateKinds: every kind of the table registers (a name no check field
// takes, once), and the engine's alert gates and commit ranges are there.
func TestGateKinds(t *testing.T) {
	t.Parallel()
	if got := gateKinds(t.TempDir()).Kinds(); !slices.Equal(got, []string{"alert", "commits"}) {
		t.Fatalf("gate kinds %v, want alert and commits", got)
	}
}
