package server

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/gates"
)

// wordy describes its gates by their spec.
type wordy struct{}

func (wordy) Evaluate(context.Context, gates.Target, json.RawMessage) (gates.Outcome, error) {
	return gates.Outcome{}, nil
}

func (wordy) Describe(spec json.RawMessage) string { return "asks about " + string(spec) }

// TestPreviewDescribesGatesByKind: a push's preview says what a gate will
// ask in its kind's own words, and names a kind nothing registered.
func TestPreviewDescribesGatesByKind(t *testing.T) {
	t.Parallel()
	reg := &gates.Registry{}
	if err := reg.Register("wordy", wordy{}); err != nil {
		t.Fatal(err)
	}
	s := &Server{gateKind: reg, now: func() time.Time { return time.Unix(0, 0) }}
	check := func(kind string) ds.Check {
		return ds.Check{Kind: ds.CheckProtection, Name: kind, Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureBlock,
			Entity: ds.ID{Name: kind}, Source: "releaseChannel", Attachment: kind, Gate: &ds.Gate{Kind: kind, Spec: json.RawMessage(`{"x":1}`)}}
	}
	ch := engine.Channel{Channel: ds.Channel{Name: "prod", Checks: []ds.Check{check("wordy"), check("other")}}, Version: "v1", StateID: "ds"}
	got := s.gates("app", ch, nil)
	want := []string{
		`protection wordy (deployment): asks about {"x":1} then`,
		`protection other (deployment): asks its other gate then`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("preview gates:\n got %q\nwant %q", got, want)
	}
}
