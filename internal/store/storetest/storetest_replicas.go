package storetest

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// replicaTests are the conformance cases of replicas (the servers that
// accept agents).
var replicaTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Replica/PutList", testReplicaPutList},
	{"Replica/PutAgain", testReplicaPutAgain},
	{"Replica/MaxAge", testReplicaMaxAge},
	{"Replica/Remove", testReplicaRemove},
	{"Replica/Invalid", testReplicaInvalid},
}

// replicaSlack is how far a replica's SeenAt, by the store's clock (the
// database's for a shared store), may be from the test's clock.
const replicaSlack = 5 * time.Second

func listReplicas(t *testing.T, s store.Store, maxAge time.Duration) []store.Replica {
	t.Helper()
	list, err := s.ListReplicas(t.Context(), maxAge)
	must(t, err)
	return list
}

// seenNow fails unless every replica's SeenAt is the current time (between
// before and now, give or take replicaSlack), in UTC, and returns want with
// the SeenAt of got, to compare the rest with same.
func seenNow(t *testing.T, got, want []store.Replica, before time.Time, what string) []store.Replica {
	t.Helper()
	after := time.Now()
	out := make([]store.Replica, len(want))
	copy(out, want)
	for i, r := range got {
		switch {
		case r.SeenAt.IsZero():
			t.Errorf("%s: SeenAt of %s is zero", what, r.Name)
		case r.SeenAt.Before(before.Add(-replicaSlack)) || r.SeenAt.After(after.Add(replicaSlack)):
			t.Errorf("%s: SeenAt of %s = %v, want the current time (between %v and %v)", what, r.Name, r.SeenAt, before, after)
		case r.SeenAt.Location() != time.UTC:
			t.Errorf("%s: SeenAt of %s in %v, want UTC", what, r.Name, r.SeenAt.Location())
		}
		if i < len(out) {
			out[i].SeenAt = r.SeenAt
		}
	}
	return out
}

// testReplicaPutList: an empty store lists no replica; put replicas are
// listed by name with the URL given and SeenAt the current time, whatever
// SeenAt they were put with.
func testReplicaPutList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got := listReplicas(t, s, time.Hour); len(got) != 0 {
		t.Fatalf("ListReplicas of an empty store = %+v", got)
	}
	before := time.Now()
	beta := store.Replica{Name: "server-beta", AgentURL: "https://beta.example:8443"}
	alpha := store.Replica{Name: "server-alpha", AgentURL: "https://10.0.0.1:8443", SeenAt: ts(1)} // SeenAt is ignored
	must(t, s.PutReplica(ctx, beta))
	must(t, s.PutReplica(ctx, alpha))
	want := []store.Replica{{Name: alpha.Name, AgentURL: alpha.AgentURL}, beta}
	got := listReplicas(t, s, time.Minute)
	same(t, got, seenNow(t, got, want, before, "ListReplicas"), "ListReplicas")
	if len(got) != 2 {
		t.Fatalf("ListReplicas = %+v, want 2 replicas", got)
	}
}

// testReplicaPutAgain: a replica put again has the new URL and a later
// SeenAt; the others are unchanged.
func testReplicaPutAgain(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := time.Now()
	must(t, s.PutReplica(ctx, store.Replica{Name: "a", AgentURL: "https://a1.example:8443"}))
	must(t, s.PutReplica(ctx, store.Replica{Name: "b", AgentURL: "https://b.example:8443"}))
	first := listReplicas(t, s, time.Minute)
	first = seenNow(t, first, []store.Replica{{Name: "a", AgentURL: "https://a1.example:8443"}, {Name: "b", AgentURL: "https://b.example:8443"}}, before, "ListReplicas")
	if len(first) != 2 {
		t.Fatalf("ListReplicas = %+v, want 2 replicas", first)
	}

	time.Sleep(20 * time.Millisecond)
	must(t, s.PutReplica(ctx, store.Replica{Name: "a", AgentURL: "https://a2.example:9443"}))
	got := listReplicas(t, s, time.Minute)
	want := seenNow(t, got, []store.Replica{{Name: "a", AgentURL: "https://a2.example:9443"}, first[1]}, before, "ListReplicas after a second put")
	same(t, got, want, "ListReplicas after a second put")
	if len(got) == 2 && !got[0].SeenAt.After(first[0].SeenAt) {
		t.Errorf("SeenAt of a replica put again = %v, want after %v", got[0].SeenAt, first[0].SeenAt)
	}
	if len(got) == 2 && !got[1].SeenAt.Equal(first[1].SeenAt) {
		t.Errorf("SeenAt of a replica not put again = %v, want %v", got[1].SeenAt, first[1].SeenAt)
	}
}

// testReplicaMaxAge: ListReplicas leaves out the replicas not seen within
// maxAge; they are still listed with a longer one, and one put again is
// listed with a short one.
func testReplicaMaxAge(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutReplica(ctx, store.Replica{Name: "old", AgentURL: "https://old.example:8443"}))
	must(t, s.PutReplica(ctx, store.Replica{Name: "older", AgentURL: "https://older.example:8443"}))
	time.Sleep(200 * time.Millisecond)
	if got := listReplicas(t, s, 50*time.Millisecond); len(got) != 0 {
		t.Errorf("ListReplicas(50ms) of replicas put 200ms ago = %+v, want none", got)
	}
	if got := listReplicas(t, s, time.Minute); len(got) != 2 {
		t.Errorf("ListReplicas(1m) of replicas put 200ms ago = %+v, want both", got)
	}
	must(t, s.PutReplica(ctx, store.Replica{Name: "old", AgentURL: "https://old.example:8443"}))
	got := listReplicas(t, s, 150*time.Millisecond)
	if len(got) != 1 || got[0].Name != "old" {
		t.Errorf("ListReplicas(150ms) after putting old again = %+v, want old only", got)
	}
}

// testReplicaRemove: a removed replica is no longer listed; removing it
// again, or an unknown replica, is no error.
func testReplicaRemove(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := time.Now()
	must(t, s.PutReplica(ctx, store.Replica{Name: "a", AgentURL: "https://a.example:8443"}))
	must(t, s.PutReplica(ctx, store.Replica{Name: "b", AgentURL: "https://b.example:8443"}))
	must(t, s.RemoveReplica(ctx, "a"))
	got := listReplicas(t, s, time.Minute)
	same(t, got, seenNow(t, got, []store.Replica{{Name: "b", AgentURL: "https://b.example:8443"}}, before, "ListReplicas after a remove"),
		"ListReplicas after a remove")
	must(t, s.RemoveReplica(ctx, "a"))
	must(t, s.RemoveReplica(ctx, "nope"))
	if got := listReplicas(t, s, time.Minute); len(got) != 1 {
		t.Errorf("ListReplicas after removing unknown replicas = %+v, want b", got)
	}
	must(t, s.PutReplica(ctx, store.Replica{Name: "a", AgentURL: "https://a.example:9443"}))
	got = listReplicas(t, s, time.Minute)
	want := []store.Replica{{Name: "a", AgentURL: "https://a.example:9443"}, {Name: "b", AgentURL: "https://b.example:8443"}}
	same(t, got, seenNow(t, got, want, before, "ListReplicas after putting a removed replica again"),
		"ListReplicas after putting a removed replica again")
}

// testReplicaInvalid: a replica without a name or agent URL is a
// validation error that writes nothing.
func testReplicaInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	wantInvalid(t, s.PutReplica(ctx, store.Replica{AgentURL: "https://a.example:8443"}), "PutReplica without a name")
	wantInvalid(t, s.PutReplica(ctx, store.Replica{Name: "a"}), "PutReplica without an agent URL")
	wantInvalid(t, s.PutReplica(ctx, store.Replica{}), "PutReplica of nothing")
	if got := listReplicas(t, s, time.Hour); len(got) != 0 {
		t.Fatalf("invalid puts wrote %+v", got)
	}
}
