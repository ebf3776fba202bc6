package engine

import (
	"encoding/json"
	"testing"

	"github.com/drover-dev/drover/internal/store"
)

// TestB10RetentionReadsPreviousStateID pins the one key of Instance.Extra the
// store reads: retention keeps the desired state a rollback returns to.
func TestB10RetentionReadsPreviousStateID(t *testing.T) {
	t.Parallel()
	var inst store.Instance
	writeExtra(&inst, extra{PreviousStateID: "ds-1", PreviousVersion: "v-1"})
	var m map[string]any
	if err := json.Unmarshal(inst.Extra, &m); err != nil {
		t.Fatal(err)
	}
	if got := m[store.ExtraPreviousStateID]; got != "ds-1" {
		t.Errorf("Extra[%q] = %v, want ds-1 (Extra is %s)", store.ExtraPreviousStateID, got, inst.Extra)
	}
}
