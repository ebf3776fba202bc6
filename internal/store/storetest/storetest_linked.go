package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// linkedTests are the conformance cases of linked runtimes.
var linkedTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"LinkedRuntime/LinkGetList", testLinkGetList},
	{"LinkedRuntime/Conflicts", testLinkConflicts},
	{"LinkedRuntime/ByToken", testLinkedByToken},
	{"LinkedRuntime/SetToken", testSetLinkToken},
	{"LinkedRuntime/AgentState", testAgentState},
	{"LinkedRuntime/Unlink", testUnlink},
	{"LinkedRuntime/Labels", testLinkLabels},
	{"LinkedRuntime/Invalid", testLinkInvalid},
	{"LinkedRuntime/ConcurrentLinksOneWinner", testLinkConcurrent},
}

// tokenHash is the hex SHA-256 of a join token, as the server keeps it.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// linked is a linked runtime with labels, a time in tz and no agent state.
func linked(name string, i int) store.LinkedRuntime {
	return store.LinkedRuntime{
		Name:      name,
		Labels:    map[string]string{"region": fmt.Sprintf("eu-%d", i), "team": "plätform"},
		TokenHash: tokenHash(fmt.Sprintf("token-%s-%d", name, i)),
		CreatedAt: ts(i),
	}
}

// fullAgent is an agent state with every field set, times with
// nanoseconds in tz.
func fullAgent(i int) store.AgentState {
	return store.AgentState{
		Connected: true, Replica: fmt.Sprintf("server-%d", i), Version: "v1.4.2", Mode: "kubernetes", Host: "node-ü.example",
		ConnectedAt: ts(10 + i), HeartbeatAt: ts(11 + i).Add(time.Nanosecond), DisconnectedAt: ts(12 + i), Error: "connection reset by peer ✗",
	}
}

func getLinked(t *testing.T, s store.Store, name string) store.LinkedRuntime {
	t.Helper()
	r, err := s.GetLinkedRuntime(t.Context(), name)
	must(t, err)
	return r
}

func listLinked(t *testing.T, s store.Store) []store.LinkedRuntime {
	t.Helper()
	list, err := s.ListLinkedRuntimes(t.Context())
	must(t, err)
	return list
}

// testLinkGetList: linked runtimes come back as linked (labels, token hash,
// times exact in UTC, an agent state given at link), listed by name; a zero
// CreatedAt is set to the current time.
func testLinkGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got := listLinked(t, s); len(got) != 0 {
		t.Fatalf("ListLinkedRuntimes of an empty store = %+v", got)
	}
	prod, edge, lab := linked("prod", 1), linked("edge", 2), linked("lab-eu", 3)
	edge.Agent = fullAgent(2)
	for _, r := range []store.LinkedRuntime{prod, edge, lab} {
		must(t, s.LinkRuntime(ctx, r))
	}
	same(t, getLinked(t, s, "prod"), prod, "GetLinkedRuntime prod")
	same(t, getLinked(t, s, "edge"), edge, "GetLinkedRuntime edge (linked with an agent state)")
	same(t, listLinked(t, s), []store.LinkedRuntime{edge, lab, prod}, "ListLinkedRuntimes")

	before := time.Now()
	now := store.LinkedRuntime{Name: "aaa", TokenHash: tokenHash("now")}
	must(t, s.LinkRuntime(ctx, now))
	got := getLinked(t, s, "aaa")
	recent(t, got.CreatedAt, before, "CreatedAt of a runtime linked without one")
	now.CreatedAt = got.CreatedAt
	same(t, got, now, "GetLinkedRuntime aaa")
	same(t, listLinked(t, s), []store.LinkedRuntime{now, edge, lab, prod}, "ListLinkedRuntimes after a fourth")

	_, err := s.GetLinkedRuntime(ctx, "nope")
	wantErr(t, err, store.ErrNotFound, "GetLinkedRuntime of an unknown runtime")
}

// testLinkConflicts: a second runtime of a name, or with a token hash
// another has, is refused with ErrConflict and writes nothing, and so is a
// token change to another's hash.
func testLinkConflicts(t *testing.T, s store.Store) {
	ctx := t.Context()
	prod, edge := linked("prod", 1), linked("edge", 2)
	must(t, s.LinkRuntime(ctx, prod))
	must(t, s.LinkRuntime(ctx, edge))

	again := linked("prod", 9)
	wantErr(t, s.LinkRuntime(ctx, again), store.ErrConflict, "LinkRuntime of a linked name")
	stolen := linked("other", 3)
	stolen.TokenHash = edge.TokenHash
	wantErr(t, s.LinkRuntime(ctx, stolen), store.ErrConflict, "LinkRuntime with another's token hash")
	both := linked("prod", 4)
	both.TokenHash = edge.TokenHash
	wantErr(t, s.LinkRuntime(ctx, both), store.ErrConflict, "LinkRuntime of a linked name with another's token hash")

	wantErr(t, s.SetLinkToken(ctx, "prod", edge.TokenHash), store.ErrConflict, "SetLinkToken to another's token hash")
	same(t, listLinked(t, s), []store.LinkedRuntime{edge, prod}, "linked runtimes after the conflicts")
	if _, err := s.LinkedRuntimeByToken(ctx, again.TokenHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the token hash of a refused link: %v, want ErrNotFound", err)
	}
}

// testLinkedByToken: a runtime is found by its token hash, and only by it.
func testLinkedByToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	prod, edge := linked("prod", 1), linked("edge", 2)
	edge.Agent = fullAgent(1)
	must(t, s.LinkRuntime(ctx, prod))
	must(t, s.LinkRuntime(ctx, edge))
	for _, want := range []store.LinkedRuntime{prod, edge} {
		got, err := s.LinkedRuntimeByToken(ctx, want.TokenHash)
		must(t, err)
		same(t, got, want, "LinkedRuntimeByToken "+want.Name)
	}
	for _, hash := range []string{tokenHash("unknown"), "", "prod", prod.TokenHash[:32]} {
		_, err := s.LinkedRuntimeByToken(ctx, hash)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("LinkedRuntimeByToken(%q)", hash))
	}
}

// testSetLinkToken: a new token hash replaces the old one, which no longer
// finds the runtime; the rest of it is kept. An unknown runtime is
// ErrNotFound.
func testSetLinkToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	prod, edge := linked("prod", 1), linked("edge", 2)
	prod.Agent = fullAgent(1)
	must(t, s.LinkRuntime(ctx, prod))
	must(t, s.LinkRuntime(ctx, edge))

	old := prod.TokenHash
	prod.TokenHash = tokenHash("rotated")
	must(t, s.SetLinkToken(ctx, "prod", prod.TokenHash))
	_, err := s.LinkedRuntimeByToken(ctx, old)
	wantErr(t, err, store.ErrNotFound, "LinkedRuntimeByToken of the replaced token")
	got, err := s.LinkedRuntimeByToken(ctx, prod.TokenHash)
	must(t, err)
	same(t, got, prod, "LinkedRuntimeByToken of the new token")
	same(t, listLinked(t, s), []store.LinkedRuntime{edge, prod}, "linked runtimes after the token change")

	must(t, s.SetLinkToken(ctx, "prod", prod.TokenHash)) // the hash it has
	same(t, getLinked(t, s, "prod"), prod, "after setting the same token hash again")

	// The old hash is free again.
	must(t, s.SetLinkToken(ctx, "edge", old))
	edge.TokenHash = old
	same(t, getLinked(t, s, "edge"), edge, "edge after taking prod's old token hash")

	wantErr(t, s.SetLinkToken(ctx, "nope", tokenHash("x")), store.ErrNotFound, "SetLinkToken of an unknown runtime")
	if _, err := s.LinkedRuntimeByToken(ctx, tokenHash("x")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the token hash given for an unknown runtime: %v, want ErrNotFound", err)
	}
}

// testAgentState: PutAgentState replaces the agent state whole (every
// field, times exact in UTC, zero times stay zero) and nothing else; an
// unknown runtime is ErrNotFound.
func testAgentState(t *testing.T, s store.Store) {
	ctx := t.Context()
	prod, edge := linked("prod", 1), linked("edge", 2)
	must(t, s.LinkRuntime(ctx, prod))
	must(t, s.LinkRuntime(ctx, edge))
	same(t, getLinked(t, s, "prod").Agent, store.AgentState{}, "the agent state of a new link")

	prod.Agent = fullAgent(1)
	must(t, s.PutAgentState(ctx, "prod", prod.Agent))
	got := getLinked(t, s, "prod")
	same(t, got, prod, "after PutAgentState with every field")
	if !got.Agent.HeartbeatAt.Equal(prod.Agent.HeartbeatAt) || got.Agent.HeartbeatAt.Nanosecond() != prod.Agent.HeartbeatAt.Nanosecond() {
		t.Errorf("HeartbeatAt = %v, want %v", got.Agent.HeartbeatAt, prod.Agent.HeartbeatAt)
	}

	// Connected again: the disconnection and its error are gone.
	prod.Agent = store.AgentState{Connected: true, Replica: "server-2", Version: "v1.5.0", Mode: "commands", Host: "h",
		ConnectedAt: ts(30), HeartbeatAt: ts(30)}
	must(t, s.PutAgentState(ctx, "prod", prod.Agent))
	got = getLinked(t, s, "prod")
	same(t, got, prod, "after a second PutAgentState")
	if !got.Agent.DisconnectedAt.IsZero() || got.Agent.Error != "" {
		t.Errorf("a replaced agent state keeps %v, %q", got.Agent.DisconnectedAt, got.Agent.Error)
	}
	byToken, err := s.LinkedRuntimeByToken(ctx, prod.TokenHash)
	must(t, err)
	same(t, byToken, prod, "LinkedRuntimeByToken after PutAgentState")

	prod.Agent = store.AgentState{}
	must(t, s.PutAgentState(ctx, "prod", prod.Agent))
	got = getLinked(t, s, "prod")
	same(t, got, prod, "after PutAgentState of a zero state")
	if !got.Agent.ConnectedAt.IsZero() || !got.Agent.HeartbeatAt.IsZero() {
		t.Errorf("zero times came back as %v, %v", got.Agent.ConnectedAt, got.Agent.HeartbeatAt)
	}
	same(t, listLinked(t, s), []store.LinkedRuntime{edge, prod}, "ListLinkedRuntimes after the agent states")

	wantErr(t, s.PutAgentState(ctx, "nope", fullAgent(1)), store.ErrNotFound, "PutAgentState of an unknown runtime")
	must(t, s.UnlinkRuntime(ctx, "edge"))
	wantErr(t, s.PutAgentState(ctx, "edge", fullAgent(1)), store.ErrNotFound, "PutAgentState of an unlinked runtime")
}

// testUnlink: an unlinked runtime is gone (by name, by token, from the
// list), a second unlink is ErrNotFound, and its name and token hash can be
// linked again.
func testUnlink(t *testing.T, s store.Store) {
	ctx := t.Context()
	prod, edge := linked("prod", 1), linked("edge", 2)
	prod.Agent = fullAgent(1)
	must(t, s.LinkRuntime(ctx, prod))
	must(t, s.LinkRuntime(ctx, edge))

	must(t, s.UnlinkRuntime(ctx, "prod"))
	_, err := s.GetLinkedRuntime(ctx, "prod")
	wantErr(t, err, store.ErrNotFound, "GetLinkedRuntime of an unlinked runtime")
	_, err = s.LinkedRuntimeByToken(ctx, prod.TokenHash)
	wantErr(t, err, store.ErrNotFound, "LinkedRuntimeByToken of an unlinked runtime")
	same(t, listLinked(t, s), []store.LinkedRuntime{edge}, "ListLinkedRuntimes after an unlink")
	wantErr(t, s.UnlinkRuntime(ctx, "prod"), store.ErrNotFound, "UnlinkRuntime twice")
	wantErr(t, s.UnlinkRuntime(ctx, "nope"), store.ErrNotFound, "UnlinkRuntime of an unknown runtime")
	wantErr(t, s.SetLinkToken(ctx, "prod", tokenHash("y")), store.ErrNotFound, "SetLinkToken of an unlinked runtime")

	relinked := linked("prod", 5)
	relinked.TokenHash = prod.TokenHash
	must(t, s.LinkRuntime(ctx, relinked))
	same(t, getLinked(t, s, "prod"), relinked, "a runtime linked again after an unlink (nothing of the old one kept)")
}

// testLinkLabels: no labels and empty labels both read back empty (nil or
// an empty map), labels read back as given.
func testLinkLabels(t *testing.T, s store.Store) {
	ctx := t.Context()
	none := store.LinkedRuntime{Name: "none", TokenHash: tokenHash("none"), CreatedAt: ts(1)}
	empty := store.LinkedRuntime{Name: "empty", Labels: map[string]string{}, TokenHash: tokenHash("empty"), CreatedAt: ts(2)}
	some := store.LinkedRuntime{Name: "some", TokenHash: tokenHash("some"), CreatedAt: ts(3),
		Labels: map[string]string{"": "empty key", "zone": "", "quote": `"'\`, "emoji": "🚀", "a.b/c": "d"}}
	for _, r := range []store.LinkedRuntime{none, empty, some} {
		must(t, s.LinkRuntime(ctx, r))
	}
	for _, name := range []string{"none", "empty"} {
		if got := getLinked(t, s, name); len(got.Labels) != 0 {
			t.Errorf("labels of %s = %#v, want none", name, got.Labels)
		}
	}
	got := getLinked(t, s, "some")
	same(t, got, some, "a runtime with labels")
	if len(got.Labels) != len(some.Labels) {
		t.Errorf("labels = %#v, want %#v", got.Labels, some.Labels)
	}
	same(t, listLinked(t, s), []store.LinkedRuntime{empty, none, some}, "ListLinkedRuntimes")
}

// testLinkInvalid: a runtime without a name or token hash, and a token
// change to no hash, are validation errors that write nothing.
func testLinkInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	wantInvalid(t, s.LinkRuntime(ctx, store.LinkedRuntime{TokenHash: tokenHash("a")}), "LinkRuntime without a name")
	wantInvalid(t, s.LinkRuntime(ctx, store.LinkedRuntime{Name: "prod"}), "LinkRuntime without a token hash")
	wantInvalid(t, s.LinkRuntime(ctx, store.LinkedRuntime{}), "LinkRuntime of nothing")
	if got := listLinked(t, s); len(got) != 0 {
		t.Fatalf("invalid links wrote %+v", got)
	}
	prod := linked("prod", 1)
	must(t, s.LinkRuntime(ctx, prod))
	wantInvalid(t, s.SetLinkToken(ctx, "prod", ""), "SetLinkToken to no hash")
	same(t, getLinked(t, s, "prod"), prod, "prod after an invalid token change")
}

// testLinkConcurrent: of concurrent links of one name, or of one token
// hash, exactly one succeeds and the others get ErrConflict.
func testLinkConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 8
	run := func(what string, link func(i int) store.LinkedRuntime) store.LinkedRuntime {
		t.Helper()
		var (
			wg     sync.WaitGroup
			errs   [n]error
			tries  [n]store.LinkedRuntime
			winner store.LinkedRuntime
			wins   int
		)
		for i := range n {
			tries[i] = link(i)
			wg.Go(func() { errs[i] = s.LinkRuntime(ctx, tries[i]) })
		}
		wg.Wait()
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				winner = tries[i]
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("%s: link %d: %v, want nil or ErrConflict", what, i, err)
			}
		}
		if wins != 1 {
			t.Fatalf("%s: %d links succeeded, want 1: %v", what, wins, errs)
		}
		return winner
	}
	byName := run("one name", func(i int) store.LinkedRuntime { return linked("prod", i) })
	byHash := run("one token hash", func(i int) store.LinkedRuntime {
		r := linked(fmt.Sprintf("edge-%d", i), i)
		r.TokenHash = tokenHash("shared")
		return r
	})
	same(t, listLinked(t, s), []store.LinkedRuntime{byHash, byName}, "linked runtimes after the concurrent links")
}
