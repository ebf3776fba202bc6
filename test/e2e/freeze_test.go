package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// TestFreeze: drover freeze holds new rollouts in its scope (every held
// channel says who froze it and why), drover freezes lists it, a freeze of
// another application holds nothing here, and drover unfreeze lets the
// rollout go at once; bad input is refused with a clear error.
func TestFreeze(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	const app = "frozen"
	dir := twoChannelTree(t, app, "1s")
	s.ok("alice", "apply", dir+"/...")

	if r := s.as("alice", "freeze", "--app", app); r.code != 64 || !strings.Contains(r.stderr, "--reason is required") {
		t.Errorf("freeze without a reason: %s", r)
	}
	if r := s.as("alice", "freeze", "--reason", "x", "--until", "yesterday"); r.code != 64 || !strings.Contains(r.stderr, "neither an RFC 3339 time") {
		t.Errorf("freeze with a bad --until: %s", r)
	}
	if r := s.as("alice", "freeze", "--reason", "x", "--release-channel", "(@group="); r.code == 0 || !strings.Contains(r.stderr, "neither a release channel name nor a label query") {
		t.Errorf("freeze with a bad scope: %s", r)
	}
	s.ok("carol", "freeze", "--app", "elsewhere", "--reason", "not this one")
	out := s.ok("ana", "freeze", "--app", app, "--reason", "holiday freeze", "-o", "json").stdout
	var f apiv1.Freeze
	if err := json.Unmarshal([]byte(out), &f); err != nil || !strings.HasPrefix(f.ID, "frz-") || !f.Active || f.CreatedBy != "ana" {
		t.Fatalf("freeze -o json: %v\n%s", err, out)
	}
	if out := s.ok("ana", "freezes").stdout; !strings.Contains(out, f.ID) || !strings.Contains(out, "app "+app) || !strings.Contains(out, "holiday freeze") {
		t.Errorf("drover freezes:\n%s", out)
	}

	v1, _ := s.push("alice", app, "web", "image=1.0")
	st := s.waitStatus(app, "web", 30*time.Second, "staging held by the freeze", func(st *apiv1.ServiceStatus) bool {
		sc := findChannel(st, "staging")
		return sc != nil && sc.Status == "BLOCKED" && sc.Reason == "FROZEN"
	})
	if msg := findChannel(st, "staging").Message; !strings.Contains(msg, "not rolled out: frozen by ana since ") || !strings.Contains(msg, "holiday freeze ("+f.ID+"; drover unfreeze to lift)") {
		t.Errorf("staging's message: %q", msg)
	}
	time.Sleep(time.Second)
	if sc := findChannel(s.status(app, "web"), "staging"); sc.Status != "BLOCKED" || sc.Version == v1 {
		t.Fatalf("staging moved under the freeze: %s", dump(sc))
	}

	if r := s.as("bo", "unfreeze", "--app", "nosuch"); r.code == 0 || !strings.Contains(r.stderr, "no freeze in force of application nosuch; in force: ") {
		t.Errorf("unfreeze of a scope with no freeze: %s", r)
	}
	s.ok("bo", "unfreeze", "--app", app, "--comment", "holidays over")
	s.waitStatus(app, "web", 30*time.Second, "staging converged once unfrozen", func(st *apiv1.ServiceStatus) bool {
		sc := findChannel(st, "staging")
		return sc.Status == "CONVERGED" && sc.Version == v1
	})
	var list apiv1.FreezeList
	if err := json.Unmarshal([]byte(s.ok("bo", "freezes", "--all", "-o", "json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	lifted := false
	for _, g := range list.Freezes {
		lifted = lifted || g.ID == f.ID && g.LiftedBy == "bo" && g.Comment == "holidays over" && !g.Active
	}
	if len(list.Freezes) != 2 || !lifted {
		t.Errorf("freezes --all: %s", dump(list))
	}
	// The lift is in the service's history (it had no desired state yet
	// when the freeze was made).
	unfrozen := false
	for _, ev := range s.events(app, "web") {
		unfrozen = unfrozen || ev.Type == "unfrozen" && ev.Actor == "bo" && strings.Contains(ev.Message, "holidays over")
	}
	if !unfrozen {
		t.Errorf("no unfrozen event in the service's history: %s", dump(s.events(app, "web")))
	}
}

// TestApplyAfterFreezes: a freeze is no config. Configs apply (for real
// and as a dry run) with a freeze in force, after it is lifted, and after
// a global one expired, on both stores (tour 3's B28: every apply answered
// 500 "stored freeze ... unknown field id" once any freeze had been made);
// and the config list shows no freeze, to anyone (S20: a viewer of another
// application saw them there).
func TestApplyAfterFreezes(t *testing.T) {
	requireE2E(t)
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			var flags []string
			if store == "postgres" {
				flags = []string{"--database", pgtest.NewDatabase(t), "--secrets-key-file", sharedKeyring(t)}
			}
			s := newServer(t, flags...)
			const app = "thawed"
			dir := twoChannelTree(t, app, "1s")
			s.ok("alice", "apply", dir+"/...")
			applyOK := func(when string) {
				t.Helper()
				for _, args := range [][]string{{"apply", dir + "/...", "--dry-run"}, {"apply", dir + "/..."}} {
					if r := s.as("alice", args...); r.code != 0 {
						t.Errorf("%s: drover %s: %s", when, strings.Join(args, " "), r)
					}
				}
			}
			s.ok("alice", "freeze", "--app", app, "--reason", "r1")
			applyOK("with a freeze in force")
			s.ok("alice", "unfreeze", "--app", app)
			applyOK("after the freeze was lifted")
			until := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
			s.ok("alice", "freeze", "--reason", "short and global", "--until", until)
			time.Sleep(3 * time.Second)
			applyOK("after a global freeze ended")
			s.restart()
			applyOK("after a restart")

			// A viewer of an application that does not exist sees no
			// config, and no freeze; an admin sees configs, no freeze.
			view := s.ok("alice", "tokens", "create", "view-zzz", "--role", "viewer@zzz", "-o", "json").stdout
			var vt apiv1.CreateTokenResponse
			if err := json.Unmarshal([]byte(view), &vt); err != nil {
				t.Fatal(err)
			}
			for _, tok := range []string{vt.Token, s.tokenOf("alice")} {
				var list apiv1.ConfigList
				if err := getJSONAs(s, "/v1/configs", tok, &list); err != nil {
					t.Fatal(err)
				}
				for _, c := range list.Configs {
					if c.Kind == "freeze" {
						t.Errorf("/v1/configs lists a freeze: %s", dump(c))
					}
				}
			}
			var bad apiv1.ConfigList
			if err := getJSONAs(s, "/v1/configs?kind=freeze", s.tokenOf("alice"), &bad); err == nil || !strings.Contains(err.Error(), "is not a config kind") {
				t.Errorf("/v1/configs?kind=freeze: %v %s", err, dump(bad))
			}
		})
	}
}
