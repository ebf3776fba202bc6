package engine

import (
	"errors"
	"testing"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// TestRollbackToComposes: the rolled-back channel gets the earlier
// version's copy with today's gates and skips ordering; other channels are
// held where their instances are; a version without the channel, or the
// one the channel runs, is refused.
func TestRollbackToComposes(t *testing.T) {
	t.Parallel()
	gates := []ds.Approval{{Topic: "prod", MinApprovers: 1}}
	active := &ds.Compiled{Format: ds.Format, Application: "a", Service: "s", Version: "v-new", DisplayName: "1.29", Channels: []ds.Channel{
		{Name: "staging", Runtime: "r"},
		{Name: "prod", Runtime: "r", DependsOn: []string{"staging"}, Approvals: gates},
	}}
	activeD := &Desired{ID: "ds-new", Application: "a", Service: "s", Version: "v-new", DisplayName: "1.29", Channels: []Channel{
		{Channel: active.Channels[0], Version: "v-new", StateID: "ds-new", DisplayName: "1.29"},
		{Channel: active.Channels[1], Version: "v-new", StateID: "ds-new", DisplayName: "1.29"},
	}}
	old := &Desired{ID: "ds-old", Version: "v-old", DisplayName: "1.27", Channels: []Channel{
		{Channel: ds.Channel{Name: "staging", Runtime: "r"}, Version: "v-old", StateID: "ds-old", DisplayName: "1.27"},
		{Channel: ds.Channel{Name: "prod", Runtime: "r2", Objects: nil}, Version: "v-old", StateID: "ds-old", DisplayName: "1.27"},
	}}
	insts := map[string]store.Instance{
		"staging": {ReleaseChannel: "staging", TargetStateID: "ds-new", TargetVersion: "v-new", CurrentVersion: "v-new", Status: ds.StatusConverged},
		"prod":    {ReleaseChannel: "prod", TargetStateID: "ds-new", TargetVersion: "v-new", CurrentVersion: "v-new", Status: ds.StatusConverged},
	}
	got, err := RollbackTo(active, activeD, old, "prod", insts)
	if err != nil {
		t.Fatal(err)
	}
	prod, staging := got.Channels[1], got.Channels[0]
	if prod.Held == nil || *prod.Held != (ds.Held{StateID: "ds-old", Version: "v-old", DisplayName: "1.27", Rollback: true}) || prod.Runtime != "r2" || len(prod.Approvals) != 1 {
		t.Errorf("prod: %+v held %+v", prod, prod.Held)
	}
	if staging.Held == nil || *staging.Held != (ds.Held{StateID: "ds-new", Version: "v-new", DisplayName: "1.29"}) {
		t.Errorf("staging held %+v", staging.Held)
	}
	if active.Channels[1].Held != nil {
		t.Error("the active desired state was changed")
	}
	// Decoded, the channels converge where Held says; the plan of prod
	// waits for its approval, not for staging to run v-old.
	raw, err := ds.Encode(got)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := decodeState(store.DesiredState{ID: "ds-rb", Application: "a", Service: "s", Version: "v-new", Compiled: raw})
	if err != nil {
		t.Fatal(err)
	}
	if c := cs.desired.Channels[1]; c.Version != "v-old" || c.StateID != "ds-old" || c.DisplayName != "1.27" {
		t.Errorf("decoded prod: %s %s %s", c.Version, c.StateID, c.DisplayName)
	}

	noProd := &Desired{ID: "ds-x", Version: "v-x", Channels: []Channel{{Channel: ds.Channel{Name: "staging"}, Version: "v-x", StateID: "ds-x"}}}
	if _, err := RollbackTo(active, activeD, noProd, "prod", insts); !errors.Is(err, ErrNotAVersionOf) {
		t.Errorf("a version without prod: %v", err)
	}
	if _, err := RollbackTo(active, activeD, activeD, "prod", insts); !errors.Is(err, ErrNotAVersionOf) {
		t.Errorf("the version prod runs: %v", err)
	}
}
