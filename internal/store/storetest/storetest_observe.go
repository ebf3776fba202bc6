package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

var observeTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Observation/PutList", testObservations},
	{"Observation/FencedAndAtomic", testObservationsFenced},
	{"RuntimeFacts/PutList", testRuntimeFacts},
}

// testRuntimeFacts: facts are listed by runtime name, a later put replaces
// a runtime's facts whole, a zero time is set, and a nameless put fails.
func testRuntimeFacts(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got, err := s.ListRuntimeFacts(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	puts := []store.RuntimeFacts{
		{Runtime: "prod", KubeVersion: "v1.33.2", APIVersions: []string{"apps/v1", "apps/v1/Deployment"}, ObservedAt: at},
		{Runtime: "edge", KubeVersion: "v1.31.0", ObservedAt: at},
		{Runtime: "prod", KubeVersion: "v1.34.1", APIVersions: []string{"v1"}, ObservedAt: at.Add(time.Minute)},
	}
	for _, f := range puts {
		if err := s.PutRuntimeFacts(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListRuntimeFacts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.RuntimeFacts{puts[1], puts[2]}
	if len(got) != len(want) {
		t.Fatalf("facts = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Runtime != w.Runtime || g.KubeVersion != w.KubeVersion || !g.ObservedAt.Equal(w.ObservedAt) ||
			len(g.APIVersions) != len(w.APIVersions) || (len(w.APIVersions) > 0 && g.APIVersions[0] != w.APIVersions[0]) {
			t.Errorf("facts[%d] = %+v, want %+v", i, g, w)
		}
	}
	before := time.Now().Add(-time.Second)
	if err := s.PutRuntimeFacts(ctx, store.RuntimeFacts{Runtime: "edge", KubeVersion: "v1.32.0"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListRuntimeFacts(ctx); err != nil || got[0].ObservedAt.Before(before) || got[0].KubeVersion != "v1.32.0" {
		t.Errorf("after a put without a time: %+v, %v", got, err)
	}
	if err := s.PutRuntimeFacts(ctx, store.RuntimeFacts{KubeVersion: "v1"}); err == nil {
		t.Error("facts without a runtime name were accepted")
	}
}

func observation(app, svc, rc, version string) store.Observation {
	return store.Observation{
		Application: app, Service: svc, ReleaseChannel: rc, DesiredStateID: "ds-" + version, TargetVersion: version,
		Version: version, Converged: true, Message: "all replicas ready",
		Objects: []store.ObservedObject{{ObjectType: "Deployment", Namespace: "shop", Name: svc, Version: version,
			Replicas: 3, AvailableReplicas: 3, TargetReplicas: 3, Status: "ready"}},
		Info: []store.ObservedInfo{{Name: "url", Text: "https://" + svc + ".example"}},
	}
}

// testObservations: observations written by batches are listed per service,
// application and all, ordered like instances; a later one replaces the
// earlier one of its instance; a zero Since is set.
func testObservations(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := time.Now()
	b := &store.Batch{Observations: []store.Observation{
		observation("shop", "web", "staging", "v1"),
		observation("shop", "web", "prod", "v1"),
		observation("shop", "api", "prod", "v1"),
		observation("blog", "web", "prod", "v1"),
	}}
	must(t, s.Write(ctx, b))
	for _, o := range b.Observations {
		recent(t, o.Since, before, "Since set in the batch")
	}
	got, err := s.ListObservations(ctx, "shop", "web")
	must(t, err)
	if len(got) != 2 || got[0].ReleaseChannel != "prod" || got[1].ReleaseChannel != "staging" {
		t.Fatalf("observations of shop/web: %s", show(got))
	}
	want := observation("shop", "web", "prod", "v1")
	want.Since = b.Observations[1].Since
	same(t, got[0], want, "observation read back")

	failed := store.Observation{Application: "shop", Service: "web", ReleaseChannel: "prod", DesiredStateID: "ds-v2",
		TargetVersion: "v2", Error: "connection refused", Since: ts(7)}
	must(t, s.Write(ctx, &store.Batch{Observations: []store.Observation{failed}}))
	got, err = s.ListObservations(ctx, "shop", "web")
	must(t, err)
	same(t, got[0], failed, "observation replaced")
	same(t, got[1].Version, "v1", "the other instance's observation")

	for _, c := range []struct{ app, svc string }{{"shop", ""}, {"", ""}} {
		list, err := s.ListObservations(ctx, c.app, c.svc)
		must(t, err)
		var keys []string
		for _, o := range list {
			keys = append(keys, o.Application+"/"+o.Service+"/"+o.ReleaseChannel)
		}
		wantKeys := map[string][]string{
			"shop": {"shop/api/prod", "shop/web/prod", "shop/web/staging"},
			"":     {"blog/web/prod", "shop/api/prod", "shop/web/prod", "shop/web/staging"},
		}[c.app]
		same(t, keys, wantKeys, "observations listed for application "+c.app)
	}
	in, err := s.ListObservationsIn(ctx, store.ServiceSpan{First: store.ServiceRef{Application: "blog", Service: "web"},
		Last: store.ServiceRef{Application: "shop", Service: "api"}})
	must(t, err)
	var keys []string
	for _, o := range in {
		keys = append(keys, o.Application+"/"+o.Service+"/"+o.ReleaseChannel+"@"+o.Version)
	}
	same(t, keys, []string{"blog/web/prod@v1", "shop/api/prod@v1"}, "observations of blog/web to shop/api")
	none, err := s.ListObservations(ctx, "nope", "")
	must(t, err)
	if len(none) != 0 {
		t.Errorf("observations of an unknown application: %s", show(none))
	}
}

// testObservationsFenced: observations are part of the batch: a batch
// fenced by a stale lease, or with a conflicting instance, or an invalid
// observation, writes none of them.
func testObservationsFenced(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.ClaimLease(ctx, "service/shop/web", "engine-a", time.Minute)
	must(t, err)
	must(t, s.ReleaseLease(ctx, a))
	_, err = s.ClaimLease(ctx, "service/shop/web", "engine-b", time.Minute)
	must(t, err)
	err = s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: "service/shop/web", Token: a.Token},
		Observations: []store.Observation{observation("shop", "web", "prod", "v1")}})
	wantErr(t, err, store.ErrFenced, "observation under a stale lease")

	err = s.Write(ctx, &store.Batch{Instances: []store.Instance{func() store.Instance {
		in := instance("shop", "web", "prod")
		in.Revision = 5 // does not exist: a conflict
		return in
	}()}, Observations: []store.Observation{observation("shop", "web", "prod", "v1")}})
	wantErr(t, err, store.ErrConflict, "observation with a conflicting instance")

	err = s.Write(ctx, &store.Batch{Observations: []store.Observation{observation("shop", "web", "prod", "v1"), {Application: "shop"}}})
	if err == nil || errors.Is(err, store.ErrConflict) {
		t.Errorf("observation without a key: %v, want an error", err)
	}
	got, err := s.ListObservations(ctx, "", "")
	must(t, err)
	if len(got) != 0 {
		t.Errorf("refused batches wrote observations: %s", show(got))
	}
}
