package engine

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// TestPatchIsData: an outcome's change survives a round trip through JSON
// and changes the instance as before; the zero patch changes nothing.
func TestPatchIsData(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := store.CheckResult{Key: "smoke", DesiredStateID: "ds-1", Message: "old"}
	other := store.CheckResult{Key: "other", DesiredStateID: "ds-1"}
	for _, tc := range []struct {
		name         string
		p            *Patch
		before, want store.Instance
	}{
		{"nil", nil, store.Instance{ApplyAttempts: 2}, store.Instance{ApplyAttempts: 2}},
		{"zero", &Patch{}, store.Instance{ApplyAttempts: 2, Reason: ds.ReasonUpdatingPods}, store.Instance{ApplyAttempts: 2, Reason: ds.ReasonUpdatingPods}},
		{"applied", &Patch{AppliedAt: at, RuntimeMemo: "m"}, store.Instance{RuntimeMemo: "old"}, store.Instance{AppliedAt: at, RuntimeMemo: "m"}},
		{"failed for good", &Patch{Reason: ds.ReasonApplyFailed, Message: "bad", ApplyAttempts: 5}, store.Instance{ApplyAttempts: 1},
			store.Instance{Reason: ds.ReasonApplyFailed, Message: "bad", ApplyAttempts: 5}},
		{"refund", &Patch{RefundAttempt: true}, store.Instance{ApplyAttempts: 3}, store.Instance{ApplyAttempts: 2}},
		{"refund keeps one", &Patch{RefundAttempt: true}, store.Instance{ApplyAttempts: 1}, store.Instance{ApplyAttempts: 1}},
		{"check replaced", &Patch{Check: &store.CheckResult{Key: "smoke", DesiredStateID: "ds-1", Passed: true, Runs: 2}},
			store.Instance{Checks: []store.CheckResult{old, other}},
			store.Instance{Checks: []store.CheckResult{other, {Key: "smoke", DesiredStateID: "ds-1", Passed: true, Runs: 2}}}},
	} {
		p := tc.p
		if p != nil {
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			p = new(Patch)
			if err := json.Unmarshal(b, p); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p, tc.p) {
				t.Errorf("%s: round trip %+v, want %+v", tc.name, p, tc.p)
			}
		}
		got := tc.before
		got.Checks = append([]store.CheckResult(nil), tc.before.Checks...)
		p.Apply(&got)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
