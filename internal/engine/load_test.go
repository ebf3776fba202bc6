package engine

import (
	"context"
	"fmt"
	"testing"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// countingStates serves desired states by id and counts the reads.
type countingStates struct {
	compiled []byte
	reads    int
}

func (c *countingStates) GetDesiredState(_ context.Context, id string) (store.DesiredState, error) {
	c.reads++
	return store.DesiredState{ID: id, Application: "app", Service: "svc", Version: "v1", Compiled: c.compiled}, nil
}

// TestStateCacheGenerations: a desired state in use stays decoded, one no
// longer read goes within two generations, and the cache never holds more
// than two generations; a state without its compiled form is read on a miss.
func TestStateCacheGenerations(t *testing.T) {
	t.Parallel()
	compiled, err := ds.Encode(&ds.Compiled{Application: "app", Service: "svc", Version: "v1", Channels: []ds.Channel{{Name: "prod", Runtime: "rt"}}})
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStates{compiled: compiled}
	c := &stateCache{limit: 4}
	get := func(id string) {
		t.Helper()
		cs, err := c.get(t.Context(), st, store.DesiredState{ID: id})
		if err != nil || cs.desired.ID != id {
			t.Fatalf("get %s: %+v %v", id, cs, err)
		}
		if tg, err := cs.target("prod"); err != nil || tg.DesiredStateID != id || tg.ReleaseChannel != "prod" {
			t.Fatalf("target of %s: %+v %v", id, tg, err)
		}
		if _, err := cs.target("nope"); err == nil {
			t.Fatal("a release channel the state lacks has a target")
		}
	}
	for i := range 20 {
		get("hot") // used all along
		get(fmt.Sprintf("cold-%d", i))
		if n := len(c.cur) + len(c.old); n > 2*4 {
			t.Fatalf("%d entries cached, limit 2x4", n)
		}
	}
	if want := 1 + 20; st.reads != want {
		t.Errorf("%d reads of the store, want %d (the hot state once)", st.reads, want)
	}
	if c.peek("cold-0") != nil {
		t.Error("a state no longer read is still cached")
	}
	if c.peek("hot") == nil {
		t.Error("the state in use was dropped")
	}
}
