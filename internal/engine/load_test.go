package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

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

// compact keeps every channel as decoded, shares one copy of the names the
// channels repeat, and keeps appends to one channel's slices out of the next.
func TestCompactChannels(t *testing.T) {
	raw := []byte(`{"format": 2, "application": "app", "service": "svc", "version": "v1", "channels": [
		{"name": "staging", "runtime": "rt", "runtimeKind": "fake", "backend": "kubernetes", "group": "g",
		 "labels": {"tier": "web"}, "objects": [{"kind": "A"}, {"kind": "B"}], "env": {"K": "v"}},
		{"name": "prod", "runtime": "rt", "runtimeKind": "fake", "backend": "kubernetes", "dependsOn": ["staging"],
		 "objects": [{"kind": "C"}]},
		{"name": "empty", "runtime": "rt", "backend": "kubernetes", "objects": []}]}`)
	want, err := ds.DecodeWithoutGraph(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ds.DecodeWithoutGraph(raw)
	if err != nil {
		t.Fatal(err)
	}
	compact(got.Channels)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("compact changed the channels:\n got %+v\nwant %+v", got.Channels, want.Channels)
	}
	again, err := ds.DecodeWithoutGraph(raw)
	if err != nil {
		t.Fatal(err)
	}
	compact(again.Channels)
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	a, b := got.Channels, again.Channels
	if !same(a[0].Runtime, b[0].Runtime) || !same(a[0].Runtime, a[1].Runtime) || !same(a[1].DependsOn[0], b[0].Name) {
		t.Error("repeated names are held more than once")
	}
	for _, ch := range a {
		if cap(ch.Objects) != len(ch.Objects) || cap(ch.DependsOn) != len(ch.DependsOn) {
			t.Errorf("%s: a list's capacity runs into the next channel's", ch.Name)
		}
		for _, o := range ch.Objects {
			if cap(o) != len(o) {
				t.Errorf("%s: an object's capacity runs into the next one", ch.Name)
			}
		}
	}
	a[0].Objects = append(a[0].Objects, json.RawMessage(`{"kind": "X"}`))
	a[0].Objects[0] = append(a[0].Objects[0], ' ')
	if string(a[1].Objects[0]) != `{"kind": "C"}` || string(got.Channels[0].Objects[1]) != `{"kind": "B"}` {
		t.Errorf("an append wrote into a neighbour: %s, %s", a[1].Objects[0], got.Channels[0].Objects[1])
	}
	if a[2].Objects == nil || len(a[2].Objects) != 0 {
		t.Errorf("an empty object list became %#v", a[2].Objects)
	}
}
