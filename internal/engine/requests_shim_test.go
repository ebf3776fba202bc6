package engine

import (
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine/requests"
	"github.com/drover-dev/drover/internal/store"
)

// The planner's tests pause, resume and bypass as people's requests do;
// those rules live in internal/engine/requests.

func Pause(inst store.Instance, user string, now time.Time) (store.Instance, store.Event, bool) {
	return requests.Pause(inst, user, now)
}

func Resume(inst store.Instance, user string, now time.Time) (store.Instance, store.Event, bool) {
	return requests.Resume(inst, user, now)
}

func BypassableChecks(ch Channel, name string) (string, []ds.Check, error) {
	return requests.BypassableChecks(&ch.Channel, name)
}
