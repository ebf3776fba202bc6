package engine

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// system is a simulation of several services of one application for the
// tests of service.dependsOn: a world per service, planned with the other
// worlds' instances as its dependencies.
type system struct {
	worlds map[string]*world
}

// chain makes db -> api -> web (each waiting for the previous one in the
// same channel), staging then prod behind one approval.
func chain(t *testing.T, version string) *system {
	s := &system{worlds: map[string]*world{}}
	prev := ""
	for _, svc := range []string{"db", "api", "web"} {
		d := twoChannels(svc+"-ds", version)
		d.Service = svc
		for i := range d.Channels {
			if prev != "" {
				d.Channels[i].Services = []ds.ServiceDependency{{Service: prev, ReleaseChannel: d.Channels[i].Name}}
			}
		}
		w := newWorld(t, d)
		w.observed["staging"], w.observed["prod"] = Observation{}, Observation{}
		s.worlds[svc] = w
		prev = svc
	}
	return s
}

func (s *system) plan(svc string) Plan {
	w := s.worlds[svc]
	deps := ServiceDependencies{}
	for name, other := range s.worlds {
		if name != svc {
			deps[name] = refs(other.instances)
		}
	}
	p := PlanService(PlanInput{Now: w.now, Desired: w.desired, Instances: refs(w.instances), Observed: w.observed, Approvals: w.approvals, Services: deps, Settings: w.settings})
	for _, inst := range p.Instances {
		w.instances[inst.ReleaseChannel] = inst
	}
	return p
}

func (s *system) approve(svc, rc string) {
	w := s.worlds[svc]
	w.approvals = append(w.approvals, store.Approval{DesiredStateID: w.desired.ID, ReleaseChannel: rc, Topic: rc, User: "ana"})
}

func TestPlanServiceDependencies(t *testing.T) {
	t.Parallel()
	s := chain(t, "v1")
	// api first: db has no rollout yet.
	if p := s.plan("api"); len(p.Actions) != 0 {
		t.Fatalf("api applies %v before db ran", applied(p))
	}
	api := s.worlds["api"].instances["staging"]
	if api.Status != ds.StatusWaitingPreconditions || api.Reason != ds.ReasonServiceDependencyUnmet || !strings.Contains(api.Message, "db in staging (db has no rollout there yet") {
		t.Fatalf("api staging: %s %s %q", api.Status, api.Reason, api.Message)
	}
	// db applies staging; api still waits, naming db's status.
	if got := applied(s.plan("db")); !slices.Equal(got, []string{"staging=v1"}) {
		t.Fatalf("db applies %v", got)
	}
	s.plan("api")
	if msg := s.worlds["api"].instances["staging"].Message; msg != "waiting for db in staging (db: CONVERGING)" {
		t.Fatalf("api staging while db rolls out: %q", msg)
	}
	// db converges in staging: api applies staging, and only staging.
	s.worlds["db"].observed["staging"] = running("v1", true)
	s.plan("db")
	if got := applied(s.plan("api")); !slices.Equal(got, []string{"staging=v1"}) {
		t.Fatalf("api applies %v once db converged in staging", got)
	}
	s.worlds["api"].observed["staging"] = running("v1", true)
	s.plan("api")
	s.plan("web")
	s.worlds["web"].observed["staging"] = running("v1", true)
	s.plan("web")
	// db waits for its approval in prod: the chain reads as one line on web.
	s.plan("db")
	s.plan("api")
	s.plan("web")
	s.plan("web")
	web := s.worlds["web"].instances["prod"]
	if web.Reason != ds.ReasonServiceDependencyUnmet ||
		!strings.Contains(web.Message, "api in prod (api: WAITING_PRECONDITIONS: waiting for db in prod (db: WAITING_MANUAL_APPROVAL: waiting for approval (prod: 0/1 approvals)") {
		t.Fatalf("web prod: %s %q", web.Reason, web.Message)
	}
	// A rejected db fails db; api says so.
	s.worlds["db"].approvals = append(s.worlds["db"].approvals, store.Approval{DesiredStateID: "db-ds", ReleaseChannel: "prod", Topic: "prod", User: "bo", Reject: true, Comment: "not today"})
	s.plan("db")
	s.plan("api")
	if msg := s.worlds["api"].instances["prod"].Message; !strings.Contains(msg, "db in prod (db: FAILED: rejected by bo: not today)") {
		t.Fatalf("api prod behind a failed db: %q", msg)
	}
}

func TestPlanServiceDependencyMetStays(t *testing.T) {
	t.Parallel()
	s := chain(t, "v1")
	s.plan("db")
	s.worlds["db"].observed["staging"] = running("v1", true)
	s.plan("db")
	s.plan("api")
	if !slices.Contains(s.worlds["api"].instances["staging"].Satisfied, "service:db/staging@v1") {
		t.Fatalf("api staging satisfied %v", s.worlds["api"].instances["staging"].Satisfied)
	}
	// A rollback of api's channel does not wait for db.
	d := s.worlds["api"].desired
	d.Channels[1].Held = &ds.Held{StateID: "old", Version: "v0", Rollback: true}
	d.Channels[1].Version, d.Channels[1].StateID = "v0", "old"
	s.plan("api")
	// (The approval still gates it: only the ordering is skipped.)
	if inst := s.worlds["api"].instances["prod"]; inst.Status != ds.StatusWaitingManualApproval {
		t.Fatalf("rollback of api in prod: %s %s %q, want it waiting for its approval only", inst.Status, inst.Reason, inst.Message)
	}
}

// TestPlanServiceDependencyProperty plans db, api and web in random order,
// with runtimes that converge what was applied at random, approvals given
// at random: no channel of a dependant is ever applied before its
// dependency ran converged there.
func TestPlanServiceDependencyProperty(t *testing.T) {
	t.Parallel()
	finished := 0
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 43))
		s := chain(t, "v1")
		names := []string{"db", "api", "web"}
		shown := map[string]string{}
		for step := range 120 {
			svc := names[r.IntN(3)]
			w := s.worlds[svc]
			switch r.IntN(4) {
			case 0:
				rc := []string{"staging", "prod"}[r.IntN(2)]
				if v := shown[svc+"/"+rc]; v != "" {
					w.observed[rc] = running(v, true)
				}
			case 1:
				if len(w.approvals) == 0 && r.IntN(3) == 0 {
					s.approve(svc, "prod")
				}
			}
			p := s.plan(svc)
			for _, a := range p.Actions {
				shown[svc+"/"+a.ReleaseChannel] = a.Version
				w.observed[a.ReleaseChannel] = running(a.Version, false)
				for _, dep := range w.desired.Channels[slices.IndexFunc(w.desired.Channels, func(c Channel) bool { return c.Name == a.ReleaseChannel })].Services {
					di := s.worlds[dep.Service].instances[dep.ReleaseChannel]
					if di.Status != ds.StatusConverged {
						t.Fatalf("seed %d step %d: %s in %s applied while %s there is %s", seed, step, svc, a.ReleaseChannel, dep.Service, di.Status)
					}
				}
			}
		}
		if s.worlds["web"].instances["prod"].Status == ds.StatusConverged {
			finished++
		}
	}
	if finished < 30 {
		t.Errorf("only %d of 300 worlds got web to prod: the property was hardly exercised", finished)
	}
	t.Logf("%d of 300 worlds got web to prod", finished)
}

// TestPlanReleaseVersions: within a release a dependant waits for the
// release's version of its dependency, not any converged one; once a later
// push replaced the release's, any converged version does.
func TestPlanReleaseVersions(t *testing.T) {
	t.Parallel()
	s := chain(t, "v2")
	rel := &ds.Release{ID: "rel-1", Services: []ds.ReleaseService{{Service: "db", DesiredStateID: "db-ds", Version: "v2"}, {Service: "api", DesiredStateID: "api-ds", Version: "v2"}}}
	s.worlds["api"].desired.Release = rel
	// db runs v1 converged in staging (before the release).
	s.worlds["db"].instances["staging"] = store.Instance{Application: "app", Service: "db", ReleaseChannel: "staging", Status: ds.StatusConverged, CurrentVersion: "v1", DesiredVersion: "v1"}
	rel.CreatedAt = t0
	plan := func(active string) Plan {
		w := s.worlds["api"]
		return PlanService(PlanInput{Now: w.now, Desired: w.desired, Instances: refs(w.instances), Observed: w.observed,
			Services: ServiceDependencies{"db": refs(s.worlds["db"].instances)}, ActiveStates: ActiveStates{"db": {ID: active, CreatedAt: t0.Add(time.Second)}}, Settings: w.settings})
	}
	p := plan("db-ds")
	if len(p.Actions) != 0 {
		t.Fatalf("api applies %v while db runs v1, not the release's v2", applied(p))
	}
	if msg := p.Instances[0].Message; msg != "waiting for db v2 in staging (db: CONVERGED at v1)" {
		t.Fatalf("api staging: %q", msg)
	}
	// A later push of db replaced the release's: db converged is enough.
	if got := applied(plan("db-ds-later")); !slices.Equal(got, []string{"staging=v2"}) {
		t.Fatalf("api applies %v once db's release version will not come", got)
	}
}

// TestPlanSharedApproval: an approval of a shared topic given on another
// service's desired state of the release counts; a plain one does not.
func TestPlanSharedApproval(t *testing.T) {
	t.Parallel()
	d := twoChannels("api-ds", "v1")
	d.Service = "api"
	d.Channels[1].Approvals = []Gate{{Topic: ds.SharedTopic("go-live"), MinApprovers: 1, Shared: true}}
	w := newWorld(t, d)
	w.instances["staging"] = store.Instance{Application: "app", Service: "api", ReleaseChannel: "staging", DesiredStateID: "api-ds", DesiredVersion: "v1",
		TargetStateID: "api-ds", TargetVersion: "v1", CurrentVersion: "v1", Status: ds.StatusConverged}
	w.observed["staging"], w.observed["prod"] = running("v1", true), Observation{}
	w.approvals = []store.Approval{{DesiredStateID: "db-ds", Service: "db", ReleaseChannel: "prod", Topic: "prod", User: "bo"}}
	if p := w.plan(); len(p.Actions) != 0 || w.status("prod") != ds.StatusWaitingManualApproval {
		t.Fatalf("a plain approval of another service let api through: %v, %s", applied(p), w.status("prod"))
	}
	w.approvals = append(w.approvals, store.Approval{DesiredStateID: "db-ds", Service: "db", ReleaseChannel: "prod", Topic: ds.SharedTopic("go-live"), User: "ana"})
	if got := applied(w.plan()); !slices.Equal(got, []string{"prod=v1"}) {
		t.Fatalf("the shared approval given on db does not let api through: %v", got)
	}
}

func TestReleaseVersion(t *testing.T) {
	t.Parallel()
	rel := &ds.Release{ID: "rel", CreatedAt: t0, Services: []ds.ReleaseService{{Service: "db", DesiredStateID: "db-rel", Version: "v2"}}}
	cases := []struct {
		name   string
		rel    *ds.Release
		svc    string
		active ActiveStates
		want   string
	}{
		{"no release", nil, "db", nil, ""},
		{"not a member", rel, "cache", nil, ""},
		{"never pushed", rel, "db", nil, "v2"},
		{"the release's is active", rel, "db", ActiveStates{"db": {ID: "db-rel", CreatedAt: t0}}, "v2"},
		{"not pushed yet: an older one is active", rel, "db", ActiveStates{"db": {ID: "db-old", CreatedAt: t0.Add(-time.Minute)}}, "v2"},
		{"a rollback replaced it", rel, "db", ActiveStates{"db": {ID: "db-rb", CreatedAt: t0.Add(time.Minute), Rollback: true}}, "v2"},
		{"a later push replaced it", rel, "db", ActiveStates{"db": {ID: "db-new", CreatedAt: t0.Add(time.Minute)}}, ""},
	}
	for _, c := range cases {
		if got := ReleaseVersion(c.rel, c.svc, c.active); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestPlanStoredCycle: desired states pushed under configs since changed
// can wait for each other in a cycle validate never saw; their messages
// then say so and reach a fixed point instead of quoting each other
// without end.
func TestPlanStoredCycle(t *testing.T) {
	t.Parallel()
	s := &system{worlds: map[string]*world{}}
	for svc, dep := range map[string]string{"db": "api", "api": "db"} {
		d := &Desired{ID: svc + "-ds", Application: "app", Service: svc, Version: "v1", Channels: []Channel{
			{Channel: ds.Channel{Name: "prod", Runtime: "rp", Services: []ds.ServiceDependency{{Service: dep, ReleaseChannel: "prod"}}}, Version: "v1", StateID: svc + "-ds"},
		}}
		w := newWorld(t, d)
		w.observed["prod"] = Observation{}
		s.worlds[svc] = w
	}
	var last [2]string
	for i := range 20 {
		s.plan("db")
		s.plan("api")
		now := [2]string{s.worlds["db"].instances["prod"].Message, s.worlds["api"].instances["prod"].Message}
		if i > 3 && now == last {
			if !strings.Contains(now[0], "a cycle of dependencies") {
				t.Errorf("db's message does not name the cycle: %q", now[0])
			}
			return
		}
		last = now
	}
	t.Fatalf("messages still change after 20 rounds: %q", last)
}
