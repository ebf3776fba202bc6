// Package storetest is the conformance suite of store.Store: every backend
// runs it from its tests,
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { ... })
//	}
//
// The suite pins down the documented semantics of the interface, including
// under concurrency. Its names are lowercase ASCII, so any byte-wise or "C"
// collation orders them the same way (a PostgreSQL backend must compare with
// COLLATE "C"); times are compared to the nanosecond and must come back in
// UTC; JSON fields are compared as JSON values, not bytes.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Run runs the conformance suite. open must return a new, empty store each
// time it is called; the suite closes it when the subtest ends. Subtests run
// in parallel.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Config/PutVersions", testPutConfigVersions},
		{"Config/PutMany", testPutConfigs},
		{"Config/NotFound", testConfigNotFound},
		{"Config/Invalid", testConfigInvalid},
		{"Config/ListLatest", testListConfigs},
		{"Config/Concurrent", testConfigConcurrent},
		{"DesiredState/CreateGet", testDesiredStateCreateGet},
		{"DesiredState/NotFound", testDesiredStateNotFound},
		{"DesiredState/ReplacedChain", testDesiredStateChain},
		{"DesiredState/DuplicateID", testDesiredStateDuplicate},
		{"DesiredState/PushWithAudit", testDesiredStatePush},
		{"DesiredState/Invalid", testDesiredStateInvalid},
		{"DesiredState/Concurrent", testDesiredStateConcurrent},
		{"Approval/AddList", testApprovals},
		{"Approval/B14Duplicate", testApprovalDuplicate},
		{"Approval/UnknownDesiredState", testApprovalUnknown},
		{"Approval/Invalid", testApprovalInvalid},
		{"Approval/Decide", testApprovalDecide},
		{"Approval/Concurrent", testApprovalConcurrent},
		{"Approval/B26QuorumConcurrent", testApprovalQuorumConcurrent},
		{"Instance/CreateUpdate", testInstanceCreateUpdate},
		{"Instance/NotFound", testInstanceNotFound},
		{"Instance/Invalid", testInstanceInvalid},
		{"Instance/BatchAtomic", testBatchAtomic},
		{"Instance/BatchEvents", testBatchEvents},
		{"Instance/List", testListInstances},
		{"Instance/ConcurrentStaleWrites", testInstanceConcurrent},
		{"Process/AddListRemove", testProcesses},
		{"Process/Invalid", testProcessInvalid},
		{"Run/RoundTrip", testRunsRoundTrip},
		{"Run/Filter", testRunsFilter},
		{"Run/Prune", testRunsPrune},
		{"Run/NotFound", testRunNotFound},
		{"Run/Invalid", testRunsInvalid},
		{"Run/Concurrent", testRunsConcurrent},
		{"Event/AppendList", testAppendEvents},
		{"Event/Filter", testEventFilter},
		{"Event/Concurrent", testEventsConcurrent},
		{"Event/Prune", testPruneEvents},
		{"Context/Canceled", testCanceled},
		{"Check/Healthy", testCheckHealthy},
		{"DesiredState/B10Retention", testB10Retention},
		{"DesiredState/B10IdenticalPushKeepsSharedCopy", testB10IdenticalPush},
	}
	tests = append(tests, workTests...)
	tests = append(tests, observeTests...)
	tests = append(tests, linkedTests...)
	tests = append(tests, replicaTests...)
	tests = append(tests, identityTests...)
	tests = append(tests, sessionTests...)
	tests = append(tests, secretTests...)
	tests = append(tests, notifyTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// --- helpers ---

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func wantInvalid(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: got error %v, want a validation error", what, err)
	}
}

// tz is a non-UTC zone: times given in it must come back equal, in UTC.
var tz = time.FixedZone("UTC+5:30", 5*3600+1800)

// ts returns a time with nanoseconds in tz.
func ts(i int) time.Time {
	return time.Date(2025, 3, 14, 15, 9, 26, 535897932, tz).Add(time.Duration(i) * time.Minute)
}

// same fails unless got and want are equal after normalization: times are
// compared with time.Equal, JSON []byte fields as JSON values, empty and nil
// slices (and maps) alike. It also requires every time in got to be in UTC.
// head is ds as the active desired state reads return it: without Compiled.
func head(ds store.DesiredState) store.DesiredState {
	ds.Compiled = nil
	return ds
}

func same[T any](t *testing.T, got, want T, what string) {
	t.Helper()
	if loc := nonUTC(reflect.ValueOf(got)); loc != "" {
		t.Errorf("%s: time in location %s, want UTC: %+v", what, loc, got)
	}
	g, w := normalize(got), normalize(want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %s\n want %s", what, show(g), show(w))
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

var timeType = reflect.TypeFor[time.Time]()

func nonUTC(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			if tm := v.Interface().(time.Time); tm.Location() != time.UTC {
				return tm.Location().String()
			}
			return ""
		}
		for i := range v.NumField() {
			if loc := nonUTC(v.Field(i)); loc != "" {
				return loc
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			if loc := nonUTC(v.Index(i)); loc != "" {
				return loc
			}
		}
	default: // scalars hold no times
	}
	return ""
}

func normalize[T any](v T) T {
	rv := reflect.New(reflect.TypeOf(v)).Elem()
	rv.Set(reflect.ValueOf(v))
	normValue(rv)
	return rv.Interface().(T)
}

func normValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(v.Interface().(time.Time).UTC().Round(0)))
			return
		}
		for i := range v.NumField() {
			normValue(v.Field(i))
		}
	case reflect.Map:
		// Empty and nil maps alike (their values are not normalized).
		if v.Len() == 0 {
			v.SetZero()
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(canonicalJSON(v.Bytes()))
			return
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(s, v)
		for i := range s.Len() {
			normValue(s.Index(i))
		}
		v.Set(s)
	default: // scalars are compared as they are
	}
}

func canonicalJSON(b []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

// recent fails unless tm was assigned by the store during the test: within
// [before, now] give or take a minute (the store's clock may be a server's).
func recent(t *testing.T, tm, before time.Time, what string) {
	t.Helper()
	if tm.Before(before.Add(-time.Minute)) || tm.After(time.Now().Add(time.Minute)) {
		t.Errorf("%s = %v, want the current time (test started %v)", what, tm, before)
	}
	if tm.Location() != time.UTC {
		t.Errorf("%s in %v, want UTC", what, tm.Location())
	}
}

func ids(dss []store.DesiredState) []string {
	out := make([]string, len(dss))
	for i, ds := range dss {
		out[i] = ds.ID
	}
	return out
}

func seqs(evs []store.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func events(t *testing.T, s store.Store, f store.EventFilter) []store.Event {
	t.Helper()
	evs, err := s.ListEvents(t.Context(), f)
	must(t, err)
	return evs
}

func ev(app, svc, typ string) store.Event {
	return store.Event{Application: app, Service: svc, Type: ds.EventType(typ), Actor: "tester", Message: typ + " " + app + "/" + svc}
}

func desiredState(id, app, svc string, i int) store.DesiredState {
	return store.DesiredState{
		ID:              id,
		Application:     app,
		Service:         svc,
		Version:         fmt.Sprintf("1.%d.0", i),
		ConfigVersion:   int64(i + 1),
		Compiled:        []byte(fmt.Sprintf(`{"service": %q, "n": %d}`, svc, i)),
		Params:          []byte(`{"replicas": 3}`),
		ReleaseChannels: []string{"canary", "production"},
		CreatedBy:       "alice",
		CreatedAt:       ts(i),
	}
}

func create(t *testing.T, s store.Store, ds store.DesiredState, evs ...store.Event) {
	t.Helper()
	must(t, s.CreateDesiredState(t.Context(), ds, evs...))
}

func instance(app, svc, rc string) store.Instance {
	return store.Instance{
		Application:     app,
		Service:         svc,
		ReleaseChannel:  rc,
		DesiredStateID:  "ds-2",
		TargetStateID:   "ds-1",
		TargetVersion:   "1.1.0",
		CurrentStateID:  "ds-0",
		CurrentVersion:  "1.0.0",
		Status:          "progressing",
		Reason:          "Applying",
		Message:         "applying 1.1.0",
		Paused:          true,
		ApplyAttempts:   2,
		LastApplyAt:     ts(1),
		ConvergedAt:     ts(2),
		UpdatedAt:       ts(3),
		PreviousStateID: "ds-prev",
		PreviousVersion: "0.9.0",
		DesiredVersion:  "1.1.0",
		Satisfied:       []string{"staging@1.1.0", "canary@1.1.0"},
		RollbackFrom:    "1.0.0",
		RollbackReason:  "manual rollback by alice",
		FailedVersion:   "0.8.0",
		Healed:          3,
		ActionSeq:       2,
		ActionPending:   true,
		AppliedAt:       ts(4),
		Checks: []store.CheckResult{
			{Key: "releaseChannel/migrations", DesiredStateID: "ds-2", Passed: true, Message: "no pending migration", At: ts(5), Runs: 2},
			{Key: "serviceInstance/alerts", DesiredStateID: "ds-2", Error: "runtime unreachable", At: ts(6)},
		},
		RuntimeMemo: `{"version":"1.1.0","applyId":"a\u00e9","appliedAt":"2026-01-01T00:00:00Z"}`,
	}
}

// write writes instances in one batch and returns them with their new revisions.
func write(t *testing.T, s store.Store, ins ...store.Instance) []store.Instance {
	t.Helper()
	b := &store.Batch{Instances: ins}
	must(t, s.Write(t.Context(), b))
	return b.Instances
}

// --- configs ---

func testPutConfigVersions(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now()
	in := store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"a": 1}`), Hash: "h1", Source: "shop/web.yaml"}
	v1, created, err := s.PutConfig(ctx, in)
	must(t, err)
	if !created || v1.Version != 1 {
		t.Fatalf("first PutConfig: created %v, version %d; want true, 1", created, v1.Version)
	}
	recent(t, v1.CreatedAt, start, "CreatedAt")
	want := in
	want.Version, want.CreatedAt = 1, v1.CreatedAt
	same(t, v1, want, "PutConfig result")
	got, err := s.GetConfig(ctx, "service", "shop/web")
	must(t, err)
	same(t, got, v1, "GetConfig")

	// Same hash: no new version, the stored object is returned.
	again, created, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"a": 1}`), Hash: "h1", Source: "elsewhere.yaml"})
	must(t, err)
	if created {
		t.Error("PutConfig with an unchanged hash created a version")
	}
	same(t, again, v1, "PutConfig with an unchanged hash")

	v2, created, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"a": 2}`), Hash: "h2"})
	must(t, err)
	if !created || v2.Version != 2 {
		t.Fatalf("changed PutConfig: created %v, version %d; want true, 2", created, v2.Version)
	}
	got, err = s.GetConfig(ctx, "service", "shop/web")
	must(t, err)
	same(t, got, v2, "GetConfig after the second version")
	got, err = s.GetConfigVersion(ctx, "service", "shop/web", 1)
	must(t, err)
	same(t, got, v1, "GetConfigVersion 1")
	got, err = s.GetConfigVersion(ctx, "service", "shop/web", 2)
	must(t, err)
	same(t, got, v2, "GetConfigVersion 2")
	for _, v := range []int64{0, 3, -1} {
		_, err = s.GetConfigVersion(ctx, "service", "shop/web", v)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("GetConfigVersion %d", v))
	}

	// Only the latest version counts: going back to h1 is a new version.
	v3, created, err := s.PutConfig(ctx, in)
	must(t, err)
	if !created || v3.Version != 3 {
		t.Errorf("PutConfig back to the first hash: created %v, version %d; want true, 3", created, v3.Version)
	}

	// Versions are per (kind, name).
	for _, o := range []store.ConfigObject{
		{Kind: "service", Name: "shop/api", Body: []byte(`{}`), Hash: "h1"},
		{Kind: "application", Name: "shop/web", Body: []byte(`{}`), Hash: "h2"},
	} {
		got, created, err := s.PutConfig(ctx, o)
		must(t, err)
		if !created || got.Version != 1 {
			t.Errorf("PutConfig %s/%s: created %v, version %d; want true, 1", o.Kind, o.Name, created, got.Version)
		}
	}
}

func testPutConfigs(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/api", Body: []byte(`{"a": 1}`), Hash: "h1"})
	must(t, err)
	var made []store.ConfigObject
	onCreated := func(obj store.ConfigObject) store.Event {
		made = append(made, obj)
		return store.Event{Application: "shop", Type: "configured", Message: fmt.Sprintf("%s %d", obj.Name, obj.Version)}
	}
	in := []store.ConfigObject{
		{Kind: "service", Name: "shop/web", Body: []byte(`{"w": 1}`), Hash: "w1", Source: "web.yaml"},
		{Kind: "service", Name: "shop/api", Body: []byte(`{"a": 1}`), Hash: "h1"}, // unchanged
		{Kind: "application", Name: "shop", Body: []byte(`{}`), Hash: "s1"},
		{Kind: "service", Name: "shop/api", Body: []byte(`{"a": 2}`), Hash: "h2"},
	}
	got, err := s.PutConfigs(ctx, in, onCreated)
	must(t, err)
	want := []struct {
		created bool
		version int64
	}{{true, 1}, {false, 1}, {true, 1}, {true, 2}}
	if len(got) != len(want) {
		t.Fatalf("PutConfigs returned %d results, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Created != w.created || got[i].Config.Version != w.version || got[i].Config.Kind != in[i].Kind || got[i].Config.Name != in[i].Name {
			t.Errorf("result %d: %s/%s created %v version %d; want %s/%s %v %d", i, got[i].Config.Kind, got[i].Config.Name,
				got[i].Created, got[i].Config.Version, in[i].Kind, in[i].Name, w.created, w.version)
		}
		stored, err := s.GetConfigVersion(ctx, got[i].Config.Kind, got[i].Config.Name, got[i].Config.Version)
		must(t, err)
		same(t, stored, got[i].Config, fmt.Sprintf("result %d as stored", i))
	}
	latest, err := s.GetConfig(ctx, "service", "shop/api")
	must(t, err)
	same(t, latest, got[3].Config, "GetConfig after PutConfigs")
	if len(made) != 3 {
		t.Fatalf("onCreated called for %d configs, want the 3 new versions", len(made))
	}
	events, err := s.ListEvents(ctx, store.EventFilter{Application: "shop"})
	must(t, err)
	var msgs []string
	for _, e := range events {
		msgs = append(msgs, e.Message)
	}
	if want := []string{"shop/web 1", "shop 1", "shop/api 2"}; !slices.Equal(msgs, want) {
		t.Errorf("events %q, want %q", msgs, want)
	}

	// Nothing to store, and an invalid object refuses the whole call.
	if got, err := s.PutConfigs(ctx, nil, onCreated); err != nil || len(got) != 0 {
		t.Errorf("PutConfigs of none: %v %v", got, err)
	}
	_, err = s.PutConfigs(ctx, []store.ConfigObject{
		{Kind: "service", Name: "shop/new", Body: []byte(`{}`), Hash: "n1"},
		{Kind: "service", Name: "shop/bad", Body: []byte(`{}`)},
	}, onCreated)
	if err == nil {
		t.Fatal("PutConfigs with an object without a hash succeeded")
	}
	_, err = s.GetConfig(ctx, "service", "shop/new")
	wantErr(t, err, store.ErrNotFound, "a config of a refused PutConfigs")
}

func testConfigNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetConfig(ctx, "service", "shop/web")
	wantErr(t, err, store.ErrNotFound, "GetConfig of an empty store")
	_, err = s.GetConfigVersion(ctx, "service", "shop/web", 1)
	wantErr(t, err, store.ErrNotFound, "GetConfigVersion of an empty store")
	_, _, err = s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{}`), Hash: "h"})
	must(t, err)
	_, err = s.GetConfig(ctx, "application", "shop/web")
	wantErr(t, err, store.ErrNotFound, "GetConfig of another kind")
	_, err = s.GetConfig(ctx, "service", "shop/api")
	wantErr(t, err, store.ErrNotFound, "GetConfig of another name")
	list, err := s.ListConfigs(ctx, "runtime")
	must(t, err)
	if len(list) != 0 {
		t.Errorf("ListConfigs of a kind without configs = %v, want none", list)
	}
}

func testConfigInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, o := range []store.ConfigObject{
		{Name: "shop", Hash: "h", Body: []byte(`{}`)},
		{Kind: "application", Hash: "h", Body: []byte(`{}`)},
		{Kind: "application", Name: "shop", Body: []byte(`{}`)},
	} {
		_, created, err := s.PutConfig(ctx, o)
		wantInvalid(t, err, fmt.Sprintf("PutConfig %+v", o))
		if created {
			t.Errorf("PutConfig %+v created a version", o)
		}
	}
	list, err := s.ListConfigs(ctx)
	must(t, err)
	if len(list) != 0 {
		t.Errorf("invalid configs were stored: %v", list)
	}
}

func testListConfigs(t *testing.T, s store.Store) {
	ctx := t.Context()
	puts := []struct{ kind, name, hash string }{
		{"service", "shop/web", "h1"},
		{"runtime", "k8s", "h1"},
		{"service", "blog/web", "h1"},
		{"service", "shop/web", "h2"},
		{"application", "shop", "h1"},
		{"runtime", "k8s", "h2"},
		{"service", "shop/api", "h1"},
		{"runtime", "k8s", "h3"},
		{"runtime", "k8s", "h3"}, // unchanged
		{"application", "blog", "h1"},
	}
	for _, p := range puts {
		_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: p.kind, Name: p.name, Hash: p.hash,
			Body: []byte(fmt.Sprintf(`{"name": %q, "hash": %q}`, p.name, p.hash))})
		must(t, err)
	}
	type key struct {
		kind, name string
		version    int64
		hash       string
	}
	check := func(kinds []string, want []key) {
		t.Helper()
		list, err := s.ListConfigs(ctx, kinds...)
		must(t, err)
		var got []key
		for _, c := range list {
			got = append(got, key{c.Kind, c.Name, c.Version, c.Hash})
			latest, err := s.GetConfig(ctx, c.Kind, c.Name)
			must(t, err)
			same(t, c, latest, "ListConfigs entry")
		}
		if !slices.Equal(got, want) {
			t.Errorf("ListConfigs(%q):\n got  %v\n want %v", kinds, got, want)
		}
	}
	check(nil, []key{
		{"application", "blog", 1, "h1"},
		{"application", "shop", 1, "h1"},
		{"runtime", "k8s", 3, "h3"},
		{"service", "blog/web", 1, "h1"},
		{"service", "shop/api", 1, "h1"},
		{"service", "shop/web", 2, "h2"},
	})
	check([]string{"service"}, []key{
		{"service", "blog/web", 1, "h1"},
		{"service", "shop/api", 1, "h1"},
		{"service", "shop/web", 2, "h2"},
	})
	check([]string{"runtime"}, []key{{"runtime", "k8s", 3, "h3"}})
	check([]string{"protection"}, nil)
	if _, err := s.ListConfigs(ctx, "runtime", ""); err == nil {
		t.Error("ListConfigs with an empty kind: no error (every kind is asked for with none)")
	}
	check([]string{"runtime", "protection", "application"}, []key{
		{"application", "blog", 1, "h1"},
		{"application", "shop", 1, "h1"},
		{"runtime", "k8s", 3, "h3"},
	})
}

func testConfigConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		versions []int64
		created  int
	)
	for i := range n {
		wg.Go(func() {
			// Distinct hashes: every put is a new version.
			c, ok, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Hash: fmt.Sprint("h", i), Body: []byte(`{}`)})
			if err != nil || !ok {
				t.Errorf("PutConfig %d: created %v, %v", i, ok, err)
				return
			}
			// The same hash: exactly one put creates it.
			_, ok2, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/api", Hash: "same", Body: []byte(`{}`)})
			if err != nil {
				t.Errorf("PutConfig same hash %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			versions = append(versions, c.Version)
			if ok2 {
				created++
			}
		})
	}
	wg.Wait()
	slices.Sort(versions)
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(versions, want) {
		t.Errorf("concurrent versions = %v, want %v", versions, want)
	}
	if created != 1 {
		t.Errorf("%d concurrent puts of the same hash created %d versions, want 1", n, created)
	}
	c, err := s.GetConfig(ctx, "service", "shop/api")
	must(t, err)
	if c.Version != 1 {
		t.Errorf("latest version of the same-hash config = %d, want 1", c.Version)
	}
}

// --- desired states ---

func testDesiredStateCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now()
	ds := desiredState("ds-1", "shop", "web", 1)
	ds.Rollback = true
	evs := []store.Event{ev("shop", "web", "pushed")}
	evs[0].DesiredStateID = "ds-1"
	evs[0].Data = []byte(`{"version": "1.1.0"}`)
	must(t, s.CreateDesiredState(ctx, ds, evs...))
	if evs[0].Seq <= 0 {
		t.Errorf("CreateDesiredState did not set the event's Seq: %+v", evs[0])
	}
	recent(t, evs[0].Time, start, "event Time")
	got, err := s.GetDesiredState(ctx, "ds-1")
	must(t, err)
	same(t, got, ds, "GetDesiredState")
	active, err := s.ActiveDesiredState(ctx, "shop", "web")
	must(t, err)
	same(t, active, head(ds), "ActiveDesiredState (without Compiled)")
	list, err := s.ListActiveDesiredStates(ctx)
	must(t, err)
	same(t, list, []store.DesiredState{head(ds)}, "ListActiveDesiredStates (without Compiled)")
	same(t, events(t, s, store.EventFilter{}), evs, "events of CreateDesiredState")

	// Optional fields empty, CreatedAt assigned by the store.
	minimal := store.DesiredState{ID: "ds-2", Application: "shop", Service: "api"}
	create(t, s, minimal)
	got, err = s.GetDesiredState(ctx, "ds-2")
	must(t, err)
	recent(t, got.CreatedAt, start, "assigned CreatedAt")
	minimal.CreatedAt = got.CreatedAt
	same(t, got, minimal, "GetDesiredState of a minimal desired state")
}

func testDesiredStateNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetDesiredState(ctx, "nope")
	wantErr(t, err, store.ErrNotFound, "GetDesiredState")
	_, err = s.ActiveDesiredState(ctx, "shop", "web")
	wantErr(t, err, store.ErrNotFound, "ActiveDesiredState")
	list, err := s.ListActiveDesiredStates(ctx)
	must(t, err)
	if len(list) != 0 {
		t.Errorf("ListActiveDesiredStates of an empty store = %v", ids(list))
	}
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	_, err = s.ActiveDesiredState(ctx, "shop", "api")
	wantErr(t, err, store.ErrNotFound, "ActiveDesiredState of another service")
	_, err = s.ActiveDesiredState(ctx, "blog", "web")
	wantErr(t, err, store.ErrNotFound, "ActiveDesiredState of another application")
	list, err = s.ListDesiredStates(ctx, "blog", "web", 0)
	must(t, err)
	if len(list) != 0 {
		t.Errorf("ListDesiredStates of a service without pushes = %v", ids(list))
	}
}

func testDesiredStateChain(t *testing.T, s store.Store) {
	ctx := t.Context()
	// CreatedAt goes backwards: order is the order of creation, not the clock.
	ds1, ds2, ds3 := desiredState("ds-1", "shop", "web", 9), desiredState("ds-2", "shop", "web", 5), desiredState("ds-3", "shop", "web", 1)
	other := desiredState("api-1", "shop", "api", 1)
	blog := desiredState("blog-1", "blog", "web", 1)

	chain := func(want map[string]string, active string) {
		t.Helper()
		for id, replacedBy := range want {
			got, err := s.GetDesiredState(ctx, id)
			must(t, err)
			if got.ReplacedBy != replacedBy {
				t.Errorf("%s.ReplacedBy = %q, want %q", id, got.ReplacedBy, replacedBy)
			}
		}
		got, err := s.ActiveDesiredState(ctx, "shop", "web")
		must(t, err)
		if got.ID != active {
			t.Errorf("active desired state = %s, want %s", got.ID, active)
		}
	}
	create(t, s, ds1, ev("shop", "web", "pushed"))
	create(t, s, other, ev("shop", "api", "pushed"))
	chain(map[string]string{"ds-1": ""}, "ds-1")
	create(t, s, ds2, ev("shop", "web", "pushed"), ev("shop", "web", "replaced"))
	chain(map[string]string{"ds-1": "ds-2", "ds-2": ""}, "ds-2")
	create(t, s, blog, ev("blog", "web", "pushed"))
	create(t, s, ds3, ev("shop", "web", "pushed"), ev("shop", "web", "replaced"))
	chain(map[string]string{"ds-1": "ds-2", "ds-2": "ds-3", "ds-3": ""}, "ds-3")

	for _, id := range []string{"api-1", "blog-1"} {
		got, err := s.GetDesiredState(ctx, id)
		must(t, err)
		if got.ReplacedBy != "" {
			t.Errorf("%s of another service was replaced by %s", id, got.ReplacedBy)
		}
	}
	ds3got, err := s.GetDesiredState(ctx, "ds-3")
	must(t, err)
	same(t, ds3got, ds3, "newest desired state")

	for limit, want := range map[int][]string{0: {"ds-3", "ds-2", "ds-1"}, 2: {"ds-3", "ds-2"}, 1: {"ds-3"}, 5: {"ds-3", "ds-2", "ds-1"}} {
		list, err := s.ListDesiredStates(ctx, "shop", "web", limit)
		must(t, err)
		if !slices.Equal(ids(list), want) {
			t.Errorf("ListDesiredStates limit %d = %v, want %v", limit, ids(list), want)
		}
	}
	list, err := s.ListDesiredStates(ctx, "shop", "web", 0)
	must(t, err)
	ds1.ReplacedBy, ds2.ReplacedBy = "ds-2", "ds-3"
	same(t, list, []store.DesiredState{ds3, ds2, ds1}, "ListDesiredStates")

	active, err := s.ListActiveDesiredStates(ctx)
	must(t, err)
	if got, want := ids(active), []string{"blog-1", "api-1", "ds-3"}; !slices.Equal(got, want) {
		t.Errorf("ListActiveDesiredStates = %v, want %v (ordered by application and service)", got, want)
	}

	evs := events(t, s, store.EventFilter{Application: "shop", Service: "web"})
	var types []string
	for _, e := range evs {
		types = append(types, string(e.Type))
	}
	if want := []string{"pushed", "pushed", "replaced", "pushed", "replaced"}; !slices.Equal(types, want) {
		t.Errorf("events of the pushes = %v, want %v", types, want)
	}
}

// PushDesiredState writes the desired state, its events and the audit
// record together, or none of them.
func testDesiredStatePush(t *testing.T, s store.Store) {
	ctx := t.Context()
	before, err := s.AppendAudit(ctx, auditRecord("shop", "bob", 0))
	must(t, err)
	rec := auditRecord("shop", "bob", 1)
	evs := []store.Event{ev("shop", "web", "pushed")}
	seq, err := s.PushDesiredState(ctx, desiredState("ds-1", "shop", "web", 1), rec, evs...)
	must(t, err)
	if seq <= before || evs[0].Seq == 0 {
		t.Errorf("audit seq %d after %d, event seq %d: want both assigned", seq, before, evs[0].Seq)
	}
	got, err := s.ActiveDesiredState(ctx, "shop", "web")
	must(t, err)
	same(t, got, head(desiredState("ds-1", "shop", "web", 1)), "active desired state after a push")
	records, err := s.ListAudit(ctx, store.AuditFilter{})
	must(t, err)
	rec.Seq = seq
	if len(records) != 2 {
		t.Fatalf("%d audit records, want 2", len(records))
	}
	same(t, records[1], rec, "the push's audit record")

	// A push that fails writes no audit record either; nor does a record
	// that is not one write the push.
	_, err = s.PushDesiredState(ctx, desiredState("ds-1", "shop", "web", 2), auditRecord("shop", "bob", 2), ev("shop", "web", "pushed"))
	wantErr(t, err, store.ErrConflict, "PushDesiredState with an existing id")
	if _, err := s.PushDesiredState(ctx, desiredState("ds-2", "shop", "web", 2), store.AuditRecord{Identity: "bob"}); err == nil {
		t.Error("PushDesiredState with an audit record without action or outcome: no error")
	}
	if records, err := s.ListAudit(ctx, store.AuditFilter{}); err != nil || len(records) != 2 {
		t.Errorf("audit records after failed pushes: %d (%v), want 2", len(records), err)
	}
	if got, err := s.ActiveDesiredState(ctx, "shop", "web"); err != nil || got.ID != "ds-1" {
		t.Errorf("active desired state after failed pushes: %s (%v), want ds-1", got.ID, err)
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 1 {
		t.Errorf("events after failed pushes = %d, want 1", len(evs))
	}
}

func testDesiredStateDuplicate(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, desiredState("ds-1", "shop", "web", 1), ev("shop", "web", "pushed"))
	err := s.CreateDesiredState(ctx, desiredState("ds-1", "shop", "web", 2), ev("shop", "web", "pushed"))
	wantErr(t, err, store.ErrConflict, "CreateDesiredState with an existing id")
	err = s.CreateDesiredState(ctx, desiredState("ds-1", "shop", "api", 2), ev("shop", "api", "pushed"))
	wantErr(t, err, store.ErrConflict, "CreateDesiredState with an existing id of another service")

	// Nothing of the failed calls was written.
	got, err := s.ActiveDesiredState(ctx, "shop", "web")
	must(t, err)
	same(t, got, head(desiredState("ds-1", "shop", "web", 1)), "active desired state after a duplicate")
	_, err = s.ActiveDesiredState(ctx, "shop", "api")
	wantErr(t, err, store.ErrNotFound, "ActiveDesiredState of the service of the failed push")
	if evs := events(t, s, store.EventFilter{}); len(evs) != 1 {
		t.Errorf("events after failed pushes = %d, want 1", len(evs))
	}
}

func testDesiredStateInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, ds := range []store.DesiredState{
		{Application: "shop", Service: "web"},
		{ID: "x", Service: "web"},
		{ID: "x", Application: "shop"},
	} {
		wantInvalid(t, s.CreateDesiredState(ctx, ds, ev("shop", "web", "pushed")), fmt.Sprintf("CreateDesiredState %+v", ds))
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Errorf("invalid pushes appended %d events", len(evs))
	}
}

func testDesiredStateConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 10
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprint("ds-", i)
			if err := s.CreateDesiredState(ctx, desiredState(id, "shop", "web", i), ev("shop", "web", "pushed")); err != nil {
				t.Errorf("CreateDesiredState %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	list, err := s.ListDesiredStates(ctx, "shop", "web", 0)
	must(t, err)
	if len(list) != n {
		t.Fatalf("ListDesiredStates = %d desired states, want %d", len(list), n)
	}
	// Newest first, each replaced by the one created after it: one linear chain.
	if list[0].ReplacedBy != "" {
		t.Errorf("newest desired state %s replaced by %q", list[0].ID, list[0].ReplacedBy)
	}
	for i := 1; i < n; i++ {
		if list[i].ReplacedBy != list[i-1].ID {
			t.Errorf("%s replaced by %q, want %s (the next one created)", list[i].ID, list[i].ReplacedBy, list[i-1].ID)
		}
	}
	active, err := s.ActiveDesiredState(ctx, "shop", "web")
	must(t, err)
	if active.ID != list[0].ID {
		t.Errorf("active = %s, newest = %s", active.ID, list[0].ID)
	}
	all, err := s.ListActiveDesiredStates(ctx)
	must(t, err)
	if len(all) != 1 {
		t.Errorf("ListActiveDesiredStates = %v, want one", ids(all))
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != n {
		t.Errorf("events = %d, want %d", len(evs), n)
	}
}

// --- approvals ---

func approval(ds, topic, user string) store.Approval {
	return store.Approval{DesiredStateID: ds, Application: "shop", Service: "web", ReleaseChannel: "production",
		Topic: topic, User: user, Comment: "lgtm " + user, CreatedAt: ts(len(user))}
}

// addApproval records a with evs, deciding nothing.
func addApproval(ctx context.Context, s store.Store, a store.Approval, evs ...store.Event) error {
	_, err := s.AddApproval(ctx, a.DesiredStateID, func(store.DesiredState, []store.Approval) (store.Approval, []store.Event, error) {
		return a, evs, nil
	})
	return err
}

func testApprovals(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now()
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	create(t, s, desiredState("ds-2", "shop", "api", 1))
	list := func(ds string, want ...store.Approval) {
		t.Helper()
		got, err := s.ListApprovals(ctx, ds)
		must(t, err)
		same(t, got, want, "ListApprovals "+ds)
	}

	a := approval("ds-1", "production", "alice")
	evs := []store.Event{ev("shop", "web", "approved")}
	got, err := s.AddApproval(ctx, "ds-1", func(store.DesiredState, []store.Approval) (store.Approval, []store.Event, error) {
		return a, evs, nil
	})
	must(t, err)
	same(t, got, a, "AddApproval's result")
	if evs[0].Seq <= 0 {
		t.Errorf("AddApproval did not set the event's Seq")
	}
	list("ds-1", a)

	b := approval("ds-1", "production", "bob")
	b.Reject = true
	must(t, addApproval(ctx, s, b, ev("shop", "web", "rejected")))
	c := approval("ds-1", "staging", "alice")
	must(t, addApproval(ctx, s, c, ev("shop", "web", "approved")))
	// The CreatedAt of the approvals is not their order: oldest (first added) first.
	d := approval("ds-1", "production", "al")
	must(t, addApproval(ctx, s, d))
	list("ds-1", a, b, c, d)

	e := approval("ds-2", "production", "alice")
	e.Service = "api"
	e.CreatedAt = time.Time{}
	must(t, addApproval(ctx, s, e))
	all, err := s.ListApprovals(ctx, "ds-2")
	must(t, err)
	if len(all) != 1 {
		t.Fatalf("ListApprovals ds-2 = %v, want one", all)
	}
	recent(t, all[0].CreatedAt, start, "assigned CreatedAt")
	e.CreatedAt = all[0].CreatedAt
	list("ds-2", e)

	if n := len(events(t, s, store.EventFilter{})); n != 3 {
		t.Errorf("events = %d, want 3", n)
	}
}

// testApprovalDuplicate (B14): the same user and topic again, even changing
// their mind, is refused with ErrDuplicate: the first record is kept and no
// event is appended.
func testApprovalDuplicate(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	a := approval("ds-1", "production", "alice")
	evs := []store.Event{ev("shop", "web", "approved")}
	must(t, addApproval(ctx, s, a, evs...))
	for _, reject := range []bool{false, true} {
		dup := a
		dup.Reject, dup.Comment, dup.CreatedAt = reject, "changed my mind", ts(9)
		dupEvs := []store.Event{ev("shop", "web", "rejected")}
		wantErr(t, addApproval(ctx, s, dup, dupEvs...), store.ErrDuplicate, "a second approval by the same user")
		if dupEvs[0].Seq != 0 {
			t.Errorf("a duplicate approval's event got Seq %d", dupEvs[0].Seq)
		}
	}
	got, err := s.ListApprovals(ctx, "ds-1")
	must(t, err)
	same(t, got, []store.Approval{a}, "ListApprovals after duplicates")
	same(t, events(t, s, store.EventFilter{}), evs, "events after duplicate approvals")
}

func testApprovalUnknown(t *testing.T, s store.Store) {
	ctx := t.Context()
	called := false
	_, err := s.AddApproval(ctx, "nope", func(store.DesiredState, []store.Approval) (store.Approval, []store.Event, error) {
		called = true
		return approval("nope", "production", "alice"), []store.Event{ev("shop", "web", "approved")}, nil
	})
	wantErr(t, err, store.ErrNotFound, "AddApproval of an unknown desired state")
	if called {
		t.Errorf("decide was called for an unknown desired state")
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Errorf("a failed approval appended %d events", len(evs))
	}
	got, err := s.ListApprovals(ctx, "nope")
	must(t, err)
	if len(got) != 0 {
		t.Errorf("ListApprovals of an unknown desired state = %v", got)
	}
}

func testApprovalInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	create(t, s, desiredState("ds-2", "shop", "api", 1))
	for _, a := range []store.Approval{
		approval("", "production", "alice"),
		approval("ds-2", "production", "alice"), // not the desired state decided on
		approval("ds-1", "", "alice"),
		approval("ds-1", "production", ""),
	} {
		_, err := s.AddApproval(ctx, "ds-1", func(store.DesiredState, []store.Approval) (store.Approval, []store.Event, error) {
			return a, []store.Event{ev("shop", "web", "approved")}, nil
		})
		wantInvalid(t, err, fmt.Sprintf("AddApproval %+v", a))
	}
	_, err := s.AddApproval(ctx, "", func(store.DesiredState, []store.Approval) (store.Approval, []store.Event, error) {
		return approval("", "production", "alice"), nil, nil
	})
	wantInvalid(t, err, "AddApproval without a desired state")
	for _, ds := range []string{"ds-1", "ds-2"} {
		got, err := s.ListApprovals(ctx, ds)
		must(t, err)
		if len(got) != 0 {
			t.Errorf("invalid approvals were stored: %v", got)
		}
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Errorf("invalid approvals appended %d events", len(evs))
	}
}

// testApprovalDecide: decide sees the desired state as stored (replaced or
// not) and the approvals so far; its error aborts the call.
func testApprovalDecide(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	a := approval("ds-1", "production", "alice")
	must(t, addApproval(ctx, s, a))
	errRefused := errors.New("refused by decide")
	var seen store.DesiredState
	var seenApprovals []store.Approval
	_, err := s.AddApproval(ctx, "ds-1", func(ds store.DesiredState, recorded []store.Approval) (store.Approval, []store.Event, error) {
		seen, seenApprovals = ds, recorded
		return store.Approval{}, nil, errRefused
	})
	wantErr(t, err, errRefused, "AddApproval refused by decide")
	same(t, seen, desiredState("ds-1", "shop", "web", 1), "the desired state decide saw")
	same(t, seenApprovals, []store.Approval{a}, "the approvals decide saw")

	create(t, s, desiredState("ds-2", "shop", "web", 2))
	_, err = s.AddApproval(ctx, "ds-1", func(ds store.DesiredState, _ []store.Approval) (store.Approval, []store.Event, error) {
		seen = ds
		return store.Approval{}, nil, errRefused
	})
	wantErr(t, err, errRefused, "AddApproval refused by decide")
	if seen.ReplacedBy != "ds-2" {
		t.Errorf("decide saw ReplacedBy %q, want ds-2", seen.ReplacedBy)
	}
	got, err := s.ListApprovals(ctx, "ds-1")
	must(t, err)
	same(t, got, []store.Approval{a}, "ListApprovals after refusals")
}

func testApprovalConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	const n = 10
	var wg sync.WaitGroup
	var dups atomic.Int32
	for i := range n {
		wg.Go(func() {
			a := approval("ds-1", "production", "alice")
			a.Comment = fmt.Sprint("attempt ", i)
			err := addApproval(ctx, s, a, ev("shop", "web", "approved"))
			switch {
			case errors.Is(err, store.ErrDuplicate):
				dups.Add(1)
			case err != nil:
				t.Errorf("AddApproval %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	got, err := s.ListApprovals(ctx, "ds-1")
	must(t, err)
	if len(got) != 1 {
		t.Errorf("ListApprovals after %d concurrent identical approvals = %d records, want 1", n, len(got))
	}
	if d := dups.Load(); d != n-1 {
		t.Errorf("%d of %d concurrent identical approvals were reported as duplicates, want %d", d, n, n-1)
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 1 {
		t.Errorf("events after %d concurrent identical approvals = %d, want 1", n, len(evs))
	}
}

// testApprovalQuorumConcurrent (B26): distinct users approve at once a gate
// that needs one approver; decide refuses a met gate, so exactly one is
// recorded.
func testApprovalQuorumConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	errMet := errors.New("the gate has all its approvals")
	const n = 12
	var wg sync.WaitGroup
	var refused atomic.Int32
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := s.AddApproval(ctx, "ds-1", func(_ store.DesiredState, recorded []store.Approval) (store.Approval, []store.Event, error) {
				if len(recorded) >= 1 {
					return store.Approval{}, nil, errMet
				}
				return approval("ds-1", "production", fmt.Sprint("user", i)), []store.Event{ev("shop", "web", "approved")}, nil
			})
			switch {
			case errors.Is(err, errMet):
				refused.Add(1)
			case err != nil:
				t.Errorf("AddApproval %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	got, err := s.ListApprovals(ctx, "ds-1")
	must(t, err)
	if len(got) != 1 || refused.Load() != n-1 {
		t.Errorf("%d concurrent approvers of a gate for one: %d recorded (%v), %d refused; want 1 and %d", n, len(got), got, refused.Load(), n-1)
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 1 {
		t.Errorf("events = %d, want 1", len(evs))
	}
}

// --- instances ---

func testInstanceCreateUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := instance("shop", "web", "production")
	got := write(t, s, in)
	if got[0].Revision != 1 {
		t.Fatalf("created instance revision = %d, want 1", got[0].Revision)
	}
	in.Revision = 1
	// The batch keeps the caller's values (times in their zone); only Revision changes.
	same(t, normalize(got[0]), in, "written instance")
	stored, err := s.GetInstance(ctx, "shop", "web", "production")
	must(t, err)
	same(t, stored, in, "GetInstance")

	// Revision 0 means create: conflict when it exists. The batch is untouched.
	b := &store.Batch{Instances: []store.Instance{instance("shop", "web", "production")}}
	wantErr(t, s.Write(ctx, b), store.ErrConflict, "Write revision 0 of an existing instance")
	if b.Instances[0].Revision != 0 {
		t.Errorf("failed Write changed the revision to %d", b.Instances[0].Revision)
	}

	upd := stored
	upd.Status, upd.Reason, upd.Message, upd.Paused, upd.ApplyAttempts = "converged", "", "", false, 0
	upd.CurrentStateID, upd.CurrentVersion, upd.ConvergedAt, upd.LastApplyAt = "ds-2", "1.2.0", ts(10), time.Time{}
	upd.PreviousStateID, upd.PreviousVersion, upd.DesiredVersion, upd.Satisfied = "", "", "", nil
	upd.RollbackFrom, upd.RollbackReason, upd.FailedVersion = "", "", ""
	upd.Healed, upd.ActionSeq, upd.ActionPending, upd.AppliedAt, upd.Checks = 0, 0, false, time.Time{}, nil
	got = write(t, s, upd)
	if got[0].Revision != 2 {
		t.Fatalf("updated instance revision = %d, want 2", got[0].Revision)
	}
	upd.Revision = 2
	stored, err = s.GetInstance(ctx, "shop", "web", "production")
	must(t, err)
	same(t, stored, upd, "GetInstance after an update")

	// A stale revision: conflict, nothing written.
	stale := upd
	stale.Revision, stale.Status = 1, "failed"
	wantErr(t, s.Write(ctx, &store.Batch{Instances: []store.Instance{stale}}), store.ErrConflict, "Write with a stale revision")
	stale.Revision = 3 // from the future
	wantErr(t, s.Write(ctx, &store.Batch{Instances: []store.Instance{stale}}), store.ErrConflict, "Write with a future revision")
	stored, err = s.GetInstance(ctx, "shop", "web", "production")
	must(t, err)
	same(t, stored, upd, "GetInstance after conflicts")

	// A revision for an instance that does not exist.
	ghost := instance("shop", "web", "canary")
	ghost.Revision = 4
	wantErr(t, s.Write(ctx, &store.Batch{Instances: []store.Instance{ghost}}), store.ErrConflict, "Write revision 4 of a missing instance")
	_, err = s.GetInstance(ctx, "shop", "web", "canary")
	wantErr(t, err, store.ErrNotFound, "GetInstance of the missing instance")

	// A zero UpdatedAt is set by the store.
	start := time.Now()
	z := instance("shop", "web", "staging")
	z.UpdatedAt = time.Time{}
	got = write(t, s, z)
	recent(t, got[0].UpdatedAt, start, "assigned UpdatedAt")
	stored, err = s.GetInstance(ctx, "shop", "web", "staging")
	must(t, err)
	same(t, stored, got[0], "instance with an assigned UpdatedAt")

	// Write of an empty batch is a no-op.
	must(t, s.Write(ctx, &store.Batch{}))
}

func testInstanceNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetInstance(ctx, "shop", "web", "production")
	wantErr(t, err, store.ErrNotFound, "GetInstance of an empty store")
	write(t, s, instance("shop", "web", "production"))
	for _, k := range [][3]string{{"shop", "web", "canary"}, {"shop", "api", "production"}, {"blog", "web", "production"}} {
		_, err = s.GetInstance(ctx, k[0], k[1], k[2])
		wantErr(t, err, store.ErrNotFound, fmt.Sprint("GetInstance ", k))
	}
}

func testInstanceInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, in := range []store.Instance{
		instance("", "web", "production"),
		instance("shop", "", "production"),
		instance("shop", "web", ""),
	} {
		b := &store.Batch{Instances: []store.Instance{in}, Events: []store.Event{ev("shop", "web", "applied")}}
		wantInvalid(t, s.Write(ctx, b), fmt.Sprintf("Write %s/%s/%s", in.Application, in.Service, in.ReleaseChannel))
	}
	list, err := s.ListInstances(ctx, "", "")
	must(t, err)
	if len(list) != 0 || len(events(t, s, store.EventFilter{})) != 0 {
		t.Errorf("invalid writes were stored: %v", list)
	}
}

func testBatchAtomic(t *testing.T, s store.Store) {
	ctx := t.Context()
	xy := write(t, s, instance("shop", "web", "production"), instance("shop", "web", "canary"))
	x, y := xy[0], xy[1]

	newX := x
	newX.Status = "changed"
	newY := y
	newY.Revision = 0 // conflicts: exists
	z := instance("shop", "api", "production")
	b := &store.Batch{
		Instances: []store.Instance{newX, z, newY},
		Events:    []store.Event{ev("shop", "web", "applying"), ev("shop", "api", "applying")},
	}
	wantErr(t, s.Write(ctx, b), store.ErrConflict, "Write of a batch with one conflict")
	if revs := []int64{b.Instances[0].Revision, b.Instances[1].Revision, b.Instances[2].Revision}; !slices.Equal(revs, []int64{1, 0, 0}) {
		t.Errorf("failed Write changed the batch's revisions to %v", revs)
	}
	if b.Events[0].Seq != 0 || b.Events[1].Seq != 0 {
		t.Errorf("failed Write set event seqs %v", seqs(b.Events))
	}
	stored, err := s.GetInstance(ctx, "shop", "web", "production")
	must(t, err)
	same(t, stored, x, "instance of a failed batch")
	_, err = s.GetInstance(ctx, "shop", "api", "production")
	wantErr(t, err, store.ErrNotFound, "new instance of a failed batch")
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Errorf("failed batch appended %d events", len(evs))
	}

	// The same batch without the conflict goes through.
	b.Instances = b.Instances[:2]
	must(t, s.Write(ctx, b))
	if revs := []int64{b.Instances[0].Revision, b.Instances[1].Revision}; !slices.Equal(revs, []int64{2, 1}) {
		t.Errorf("revisions after Write = %v, want [2 1]", revs)
	}
}

func testBatchEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now()
	evs := []store.Event{ev("shop", "web", "applying"), ev("shop", "web", "applied"), ev("shop", "api", "applying")}
	evs[1].Time = ts(4)
	evs[2].Data = []byte(`{"attempt": 1}`)
	b := &store.Batch{
		Instances: []store.Instance{instance("shop", "web", "production"), instance("shop", "api", "production")},
		Events:    slices.Clone(evs),
	}
	must(t, s.Write(ctx, b))
	for i, e := range b.Events {
		if e.Seq <= 0 || (i > 0 && e.Seq <= b.Events[i-1].Seq) {
			t.Errorf("batch event seqs = %v, want increasing", seqs(b.Events))
			break
		}
	}
	recent(t, b.Events[0].Time, start, "assigned event Time")
	if !b.Events[1].Time.Equal(ts(4)) {
		t.Errorf("given event Time changed to %v", b.Events[1].Time)
	}
	same(t, events(t, s, store.EventFilter{}), b.Events, "events of a batch")
	list, err := s.ListInstances(ctx, "shop", "")
	must(t, err)
	if len(list) != 2 {
		t.Errorf("ListInstances = %d instances, want 2", len(list))
	}

	// A batch with only events.
	must(t, s.Write(ctx, &store.Batch{Events: []store.Event{ev("shop", "web", "converged")}}))
	if n := len(events(t, s, store.EventFilter{})); n != 4 {
		t.Errorf("events = %d, want 4", n)
	}
}

func testListInstances(t *testing.T, s store.Store) {
	ctx := t.Context()
	write(t, s, instance("shop", "web", "production"), instance("blog", "web", "production"))
	write(t, s, instance("shop", "api", "production"))
	write(t, s, instance("shop", "web", "canary"), instance("shop", "api", "canary"))
	// keys names the instances listed, each checked against GetInstance.
	keys := func(list []store.Instance, what string) []string {
		t.Helper()
		var got []string
		for _, in := range list {
			got = append(got, in.Application+"/"+in.Service+"/"+in.ReleaseChannel)
			stored, err := s.GetInstance(ctx, in.Application, in.Service, in.ReleaseChannel)
			must(t, err)
			same(t, in, stored, what+" entry")
		}
		return got
	}
	check := func(app, svc string, want ...string) {
		t.Helper()
		list, err := s.ListInstances(ctx, app, svc)
		must(t, err)
		if got := keys(list, "ListInstances"); !slices.Equal(got, want) {
			t.Errorf("ListInstances(%q, %q) = %v, want %v", app, svc, got, want)
		}
	}
	check("", "", "blog/web/production", "shop/api/canary", "shop/api/production", "shop/web/canary", "shop/web/production")
	check("shop", "", "shop/api/canary", "shop/api/production", "shop/web/canary", "shop/web/production")
	check("shop", "web", "shop/web/canary", "shop/web/production")
	check("blog", "web", "blog/web/production")
	check("blog", "api")
	check("nope", "")

	write(t, s, instance("shop", "zoo", "production"))
	span := func(a1, s1, a2, s2 string, want ...string) {
		t.Helper()
		list, err := s.ListInstancesIn(ctx, store.ServiceSpan{First: store.ServiceRef{Application: a1, Service: s1},
			Last: store.ServiceRef{Application: a2, Service: s2}})
		must(t, err)
		if got := keys(list, "ListInstancesIn"); !slices.Equal(got, want) {
			t.Errorf("ListInstancesIn(%s/%s to %s/%s) = %v, want %v", a1, s1, a2, s2, got, want)
		}
		// The briefs are the same instances, in the same order, with
		// their fields.
		briefs, err := s.ListInstanceBriefs(ctx, store.ServiceSpan{First: store.ServiceRef{Application: a1, Service: s1},
			Last: store.ServiceRef{Application: a2, Service: s2}})
		must(t, err)
		wantBriefs := make([]store.InstanceBrief, len(list))
		for i, in := range list {
			wantBriefs[i] = store.InstanceBrief{Application: in.Application, Service: in.Service, ReleaseChannel: in.ReleaseChannel,
				DesiredStateID: in.DesiredStateID, Status: in.Status, CurrentVersion: in.CurrentVersion}
		}
		if !slices.Equal(briefs, wantBriefs) {
			t.Errorf("ListInstanceBriefs(%s/%s to %s/%s) = %+v, want %+v", a1, s1, a2, s2, briefs, wantBriefs)
		}
	}
	span("blog", "web", "shop", "web", "blog/web/production", "shop/api/canary", "shop/api/production", "shop/web/canary", "shop/web/production")
	span("shop", "api", "shop", "api", "shop/api/canary", "shop/api/production")
	span("shop", "b", "shop", "y", "shop/web/canary", "shop/web/production") // bounds need not exist
	span("blog", "x", "shop", "a")
	span("shop", "zoo", "shop", "api") // empty when First > Last
}

func testInstanceConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	write(t, s, instance("shop", "web", "production"))
	const n, rounds = 8, 5
	for round := 1; round <= rounds; round++ {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int
		)
		for i := range n {
			wg.Go(func() {
				in := instance("shop", "web", "production")
				in.Revision = int64(round)
				in.Message = fmt.Sprint("writer ", i)
				b := &store.Batch{Instances: []store.Instance{in}, Events: []store.Event{ev("shop", "web", in.Message)}}
				err := s.Write(ctx, b)
				switch {
				case err == nil:
					if b.Instances[0].Revision != int64(round+1) {
						t.Errorf("winner's revision = %d, want %d", b.Instances[0].Revision, round+1)
					}
					mu.Lock()
					winners = append(winners, i)
					mu.Unlock()
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("concurrent Write: %v, want nil or ErrConflict", err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d writers of revision %d succeeded (%v), want exactly 1", round, len(winners), round, winners)
		}
		got, err := s.GetInstance(ctx, "shop", "web", "production")
		must(t, err)
		if want := fmt.Sprint("writer ", winners[0]); got.Revision != int64(round+1) || got.Message != want {
			t.Errorf("round %d: stored revision %d message %q, want %d %q", round, got.Revision, got.Message, round+1, want)
		}
	}
	if n := len(events(t, s, store.EventFilter{})); n != rounds {
		t.Errorf("events = %d, want one per successful write (%d)", n, rounds)
	}
}

// --- task runs ---

// runsKept is how many runs per instance and kind RecordRun keeps.
const runsKept = 200

// taskRun returns a run with every field set.
func taskRun(app, svc, rc, kind string, i int) store.TaskRun {
	return store.TaskRun{
		Application:    app,
		Service:        svc,
		ReleaseChannel: rc,
		Runtime:        "scripts",
		Kind:           kind,
		Version:        fmt.Sprintf("1.%d.0", i),
		Command:        []string{"./deploy.sh", "--version", fmt.Sprintf("1.%d.0", i), `a "quoted" arg with <html> & ünïcödé`},
		ExitCode:       i % 3,
		Error:          fmt.Sprint("error ", i),
		StartedAt:      ts(i),
		FinishedAt:     ts(i).Add(1500 * time.Millisecond),
		Stdout:         fmt.Sprintf("run %d\nline two\twith a tab ✓\n", i),
		Stderr:         fmt.Sprint("warning: ", i, "\n"),
		Truncated:      i%2 == 1,
	}
}

// record records r and returns it with its assigned id.
func record(t *testing.T, s store.Store, r store.TaskRun) store.TaskRun {
	t.Helper()
	id, err := s.RecordRun(t.Context(), r)
	must(t, err)
	if id <= 0 {
		t.Fatalf("RecordRun returned id %d, want positive", id)
	}
	r.ID = id
	return r
}

func listRuns(t *testing.T, s store.Store, f store.RunFilter) []store.TaskRun {
	t.Helper()
	runs, err := s.ListRuns(t.Context(), f)
	must(t, err)
	return runs
}

func runIDs(runs []store.TaskRun) []int64 {
	out := make([]int64, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

func testRunsRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now()
	if runs := listRuns(t, s, store.RunFilter{}); len(runs) != 0 {
		t.Fatalf("ListRuns of an empty store = %v", runs)
	}

	full := taskRun("shop", "web", "production", "apply", 1)
	full.ExitCode = -1
	full.Error = "timed out after 5m"
	full.Stdout = "multi\nline\r\noutput with ünïcödé and emoji 🚀\n" + strings.Repeat("x", 64<<10)
	full.ID = 12345 // ignored
	id, err := s.RecordRun(ctx, full)
	must(t, err)
	if id <= 0 || id == 12345 {
		t.Errorf("RecordRun id = %d, want a positive id assigned by the store", id)
	}
	full.ID = id
	got, err := s.GetRun(ctx, id)
	must(t, err)
	same(t, got, full, "GetRun")
	if !got.StartedAt.Equal(full.StartedAt) || !got.FinishedAt.Equal(full.FinishedAt) {
		t.Errorf("times = %v, %v, want %v, %v", got.StartedAt, got.FinishedAt, full.StartedAt, full.FinishedAt)
	}
	if got.Stdout != full.Stdout || got.Stderr != full.Stderr || !slices.Equal(got.Command, full.Command) {
		t.Error("output or command changed")
	}

	// Zero times are the current time; empty optional fields stay empty.
	bare := store.TaskRun{Application: "shop", Service: "web", ReleaseChannel: "production", Kind: "getInfo"}
	bare = record(t, s, bare)
	if bare.ID <= full.ID {
		t.Errorf("second id %d, not after %d", bare.ID, full.ID)
	}
	got, err = s.GetRun(ctx, bare.ID)
	must(t, err)
	recent(t, got.StartedAt, start, "assigned StartedAt")
	recent(t, got.FinishedAt, start, "assigned FinishedAt")
	bare.StartedAt, bare.FinishedAt = got.StartedAt, got.FinishedAt
	same(t, got, bare, "GetRun of a run with only its key")

	// Only FinishedAt zero: StartedAt is kept.
	half := taskRun("shop", "web", "production", "fetch", 2)
	half.FinishedAt = time.Time{}
	half = record(t, s, half)
	got, err = s.GetRun(ctx, half.ID)
	must(t, err)
	if !got.StartedAt.Equal(half.StartedAt) {
		t.Errorf("StartedAt = %v, want %v", got.StartedAt, half.StartedAt)
	}
	recent(t, got.FinishedAt, start, "assigned FinishedAt")
	half.FinishedAt = got.FinishedAt

	same(t, listRuns(t, s, store.RunFilter{}), []store.TaskRun{half, bare, full}, "ListRuns")
}

func testRunsFilter(t *testing.T, s store.Store) {
	type key struct{ app, svc, rc, kind string }
	keys := []key{
		{"shop", "web", "production", "apply"}, {"shop", "web", "canary", "apply"}, {"shop", "api", "production", "fetch"},
		{"blog", "web", "production", "apply"}, {"shop", "web", "production", "getInfo"}, {"shop", "web", "production", "apply"},
		{"blog", "db", "staging", "plan"}, {"shop", "api", "production", "apply"}, {"shop", "web", "canary", "getInfo"},
	}
	var all []store.TaskRun // oldest first
	for i, k := range keys {
		r := taskRun(k.app, k.svc, k.rc, k.kind, i)
		// Times do not decide the order: the newest recorded comes first.
		r.StartedAt, r.FinishedAt = ts(100-i), ts(101-i)
		all = append(all, record(t, s, r))
	}
	// pick returns the runs with the given indexes, newest first.
	pick := func(idx ...int) []store.TaskRun {
		var out []store.TaskRun
		for _, i := range slices.Backward(idx) {
			out = append(out, all[i])
		}
		return out
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	for _, tc := range []struct {
		f    store.RunFilter
		want []store.TaskRun
	}{
		{store.RunFilter{}, newest},
		{store.RunFilter{Limit: 100}, newest},
		{store.RunFilter{Limit: 3}, newest[:3]},
		{store.RunFilter{Application: "shop"}, pick(0, 1, 2, 4, 5, 7, 8)},
		{store.RunFilter{Application: "shop", Service: "web"}, pick(0, 1, 4, 5, 8)},
		{store.RunFilter{Application: "shop", Service: "web", ReleaseChannel: "production"}, pick(0, 4, 5)},
		{store.RunFilter{Application: "shop", Service: "web", ReleaseChannel: "production", Kind: "apply"}, pick(0, 5)},
		{store.RunFilter{Application: "shop", Service: "web", ReleaseChannel: "production", Kind: "apply", Limit: 1}, pick(5)},
		{store.RunFilter{Service: "web"}, pick(0, 1, 3, 4, 5, 8)},
		{store.RunFilter{ReleaseChannel: "canary"}, pick(1, 8)},
		{store.RunFilter{Kind: "apply"}, pick(0, 1, 3, 5, 7)},
		{store.RunFilter{Kind: "apply", Limit: 2}, pick(5, 7)},
		{store.RunFilter{Application: "blog", Kind: "plan"}, pick(6)},
		{store.RunFilter{Application: "nope"}, nil},
		{store.RunFilter{Application: "shop", Kind: "plan"}, nil},
	} {
		same(t, listRuns(t, s, tc.f), tc.want, fmt.Sprintf("ListRuns(%+v)", tc.f))
	}
}

func testRunsPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Older runs of other instances and kinds, including ones sharing all
	// but one field of the pruned key.
	others := map[string]store.RunFilter{
		"other kind":    {Application: "shop", Service: "web", ReleaseChannel: "production", Kind: "fetch"},
		"other channel": {Application: "shop", Service: "web", ReleaseChannel: "canary", Kind: "apply"},
		"other service": {Application: "shop", Service: "api", ReleaseChannel: "production", Kind: "apply"},
		"other app":     {Application: "blog", Service: "web", ReleaseChannel: "production", Kind: "apply"},
	}
	recordOthers := func(i int) {
		for _, f := range others {
			record(t, s, taskRun(f.Application, f.Service, f.ReleaseChannel, f.Kind, i))
		}
	}
	wantOthers := map[string][]store.TaskRun{}
	for i := range 3 {
		recordOthers(i)
	}
	for name, f := range others {
		wantOthers[name] = listRuns(t, s, f)
	}

	pruned := store.RunFilter{Application: "shop", Service: "web", ReleaseChannel: "production", Kind: "apply"}
	const total = runsKept + 5
	var recorded []store.TaskRun // oldest first
	for i := range total {
		recorded = append(recorded, record(t, s, taskRun("shop", "web", "production", "apply", i)))
		if i == runsKept-1 {
			if n := len(listRuns(t, s, pruned)); n != runsKept {
				t.Fatalf("after %d runs, %d are kept, want all", runsKept, n)
			}
		}
	}
	want := slices.Clone(recorded[total-runsKept:])
	slices.Reverse(want)
	got := listRuns(t, s, pruned)
	if len(got) != runsKept {
		t.Fatalf("after %d runs, ListRuns = %d runs, want %d", total, len(got), runsKept)
	}
	if !slices.Equal(runIDs(got), runIDs(want)) {
		t.Errorf("kept ids %v, want the newest %v", runIDs(got), runIDs(want))
	}
	same(t, got, want, "kept runs")
	for _, r := range recorded[:total-runsKept] {
		_, err := s.GetRun(ctx, r.ID)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("GetRun of pruned run %d", r.ID))
	}
	for name, f := range others {
		same(t, listRuns(t, s, f), wantOthers[name], name+" runs after pruning")
	}
	if n := len(listRuns(t, s, store.RunFilter{})); n != runsKept+3*len(others) {
		t.Errorf("ListRuns of everything = %d runs, want %d", n, runsKept+3*len(others))
	}
	// New runs keep coming after the pruned ones.
	last := record(t, s, taskRun("shop", "web", "production", "apply", total))
	if last.ID <= recorded[total-1].ID {
		t.Errorf("id after pruning %d, not after %d", last.ID, recorded[total-1].ID)
	}
	if got := listRuns(t, s, pruned); len(got) != runsKept || got[0].ID != last.ID || got[runsKept-1].ID != recorded[total-runsKept+1].ID {
		t.Errorf("after one more run: %d runs from %d to %d", len(got), got[0].ID, got[len(got)-1].ID)
	}
}

func testRunNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []int64{0, -1, 1, 1 << 40} {
		_, err := s.GetRun(ctx, id)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("GetRun(%d) of an empty store", id))
	}
	r := record(t, s, taskRun("shop", "web", "production", "apply", 1))
	_, err := s.GetRun(ctx, r.ID+1)
	wantErr(t, err, store.ErrNotFound, "GetRun of an unknown id")
}

func testRunsInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, mutate := range []func(*store.TaskRun){
		func(r *store.TaskRun) { r.Application = "" },
		func(r *store.TaskRun) { r.Service = "" },
		func(r *store.TaskRun) { r.ReleaseChannel = "" },
		func(r *store.TaskRun) { r.Kind = "" },
	} {
		r := taskRun("shop", "web", "production", "apply", 1)
		mutate(&r)
		_, err := s.RecordRun(ctx, r)
		wantInvalid(t, err, fmt.Sprintf("RecordRun(%s/%s/%s kind %q)", r.Application, r.Service, r.ReleaseChannel, r.Kind))
	}
	if runs := listRuns(t, s, store.RunFilter{}); len(runs) != 0 {
		t.Errorf("invalid runs were stored: %v", runs)
	}
}

func testRunsConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Half the writers share one instance and kind, together recording more
	// than are kept; the others have their own.
	const writers, perWriter = 8, 60
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		shared []int64
		own    = map[int][]int64{}
	)
	for w := range writers {
		wg.Go(func() {
			kind := "apply"
			if w%2 == 1 {
				kind = fmt.Sprint("own", w)
			}
			var last int64
			for j := range perWriter {
				r := taskRun("shop", "web", "production", kind, j)
				r.Stdout = fmt.Sprint("writer ", w, " run ", j)
				id, err := s.RecordRun(ctx, r)
				if err != nil {
					t.Errorf("RecordRun: %v", err)
					return
				}
				if id <= last {
					t.Errorf("writer %d: id %d after %d, want increasing", w, id, last)
				}
				last = id
				mu.Lock()
				if w%2 == 1 {
					own[w] = append(own[w], id)
				} else {
					shared = append(shared, id)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	all := slices.Clone(shared)
	for _, ids := range own {
		all = append(all, ids...)
	}
	slices.Sort(all)
	if len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("duplicate ids among %d recorded runs", len(all))
	}

	slices.Sort(shared)
	slices.Reverse(shared)
	got := listRuns(t, s, store.RunFilter{Kind: "apply"})
	if !slices.Equal(runIDs(got), shared[:runsKept]) {
		t.Errorf("shared kind: kept %d runs %v, want the newest %d of %d", len(got), runIDs(got), runsKept, len(shared))
	}
	for w, ids := range own {
		slices.Reverse(ids)
		got := listRuns(t, s, store.RunFilter{Application: "shop", Kind: fmt.Sprint("own", w)})
		if !slices.Equal(runIDs(got), ids) {
			t.Errorf("writer %d: listed ids %v, want %v", w, runIDs(got), ids)
			continue
		}
		for j, r := range got {
			if want := fmt.Sprint("writer ", w, " run ", perWriter-1-j); r.Stdout != want {
				t.Errorf("run %d: stdout %q, want %q", r.ID, r.Stdout, want)
			}
		}
	}
}

// --- events ---

func testAppendEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now()
	must(t, s.AppendEvents(ctx)) // nothing to append
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Fatalf("ListEvents of an empty store = %v", evs)
	}
	if last, err := s.LastEventSeq(ctx); err != nil || last != 0 {
		t.Errorf("LastEventSeq of an empty store = %d, %v; want 0", last, err)
	}

	evs := []store.Event{ev("shop", "web", "configured"), ev("shop", "web", "pushed"), ev("", "", "started")}
	evs[0].Time = ts(1) // kept as given (in UTC)
	evs[1].ReleaseChannel, evs[1].DesiredStateID = "production", "ds-1"
	evs[1].Data = []byte(`{"version": "1.2.3", "params": {"a": [1, 2]}}`)
	must(t, s.AppendEvents(ctx, evs...))
	if evs[0].Seq <= 0 || evs[1].Seq <= evs[0].Seq || evs[2].Seq <= evs[1].Seq {
		t.Errorf("seqs = %v, want positive and increasing", seqs(evs))
	}
	if !evs[0].Time.Equal(ts(1)) {
		t.Errorf("given Time changed to %v", evs[0].Time)
	}
	recent(t, evs[1].Time, start, "assigned Time")
	recent(t, evs[2].Time, start, "assigned Time")
	same(t, events(t, s, store.EventFilter{}), evs, "ListEvents")

	more := []store.Event{ev("shop", "api", "pushed")}
	must(t, s.AppendEvents(ctx, more...))
	if more[0].Seq <= evs[2].Seq {
		t.Errorf("later append got seq %d, not after %d", more[0].Seq, evs[2].Seq)
	}
	same(t, events(t, s, store.EventFilter{}), append(slices.Clone(evs), more...), "ListEvents after a second append")

	// Many at once, as one write: each gets its own seq, in order, and
	// reads back as itself.
	var many []store.Event
	for i := range 21 {
		e := ev("shop", fmt.Sprint("svc", i%4), fmt.Sprint("e", i))
		e.Time = ts(i)
		many = append(many, e)
	}
	must(t, s.AppendEvents(ctx, many...))
	for i := range many {
		if i > 0 && many[i].Seq <= many[i-1].Seq {
			t.Fatalf("seqs of one append = %v, want increasing", seqs(many))
		}
	}
	same(t, events(t, s, store.EventFilter{AfterSeq: more[0].Seq}), many, "ListEvents after appending many at once")
}

func testEventFilter(t *testing.T, s store.Store) {
	ctx := t.Context()
	keys := [][2]string{
		{"shop", "web"}, {"shop", "api"}, {"blog", "web"}, {"", ""}, {"shop", "web"},
		{"blog", "web"}, {"shop", "api"}, {"shop", "web"}, {"shop", ""}, {"blog", "db"},
	}
	var all []store.Event
	for i, k := range keys {
		e := ev(k[0], k[1], fmt.Sprint("e", i))
		e.Time = ts(i)
		es := []store.Event{e}
		must(t, s.AppendEvents(ctx, es...))
		all = append(all, es[0])
	}
	pick := func(idx ...int) []store.Event {
		var out []store.Event
		for _, i := range idx {
			out = append(out, all[i])
		}
		return out
	}
	for _, tc := range []struct {
		f    store.EventFilter
		want []store.Event
	}{
		{store.EventFilter{}, all},
		{store.EventFilter{Application: "shop"}, pick(0, 1, 4, 6, 7, 8)},
		{store.EventFilter{Application: "shop", Service: "web"}, pick(0, 4, 7)},
		{store.EventFilter{Application: "blog"}, pick(2, 5, 9)},
		{store.EventFilter{Service: "web"}, pick(0, 2, 4, 5, 7)},
		{store.EventFilter{Application: "nope"}, nil},
		{store.EventFilter{AfterSeq: all[4].Seq}, all[5:]},
		{store.EventFilter{AfterSeq: all[9].Seq}, nil},
		{store.EventFilter{Limit: 3}, all[:3]},
		{store.EventFilter{Limit: 100}, all},
		{store.EventFilter{Application: "shop", AfterSeq: all[1].Seq, Limit: 2}, pick(4, 6)},
		{store.EventFilter{Application: "shop", Service: "web", AfterSeq: all[0].Seq, Limit: 5}, pick(4, 7)},
		{store.EventFilter{Types: []ds.EventType{"e1", "e4", "e9"}}, pick(1, 4, 9)},
		{store.EventFilter{Types: []ds.EventType{"e1", "e4", "e9"}, AfterSeq: all[1].Seq, Limit: 1}, pick(4)},
		{store.EventFilter{Application: "shop", Types: []ds.EventType{"e2", "e6", "e7"}}, pick(6, 7)},
		{store.EventFilter{Types: []ds.EventType{"none"}}, nil},
	} {
		same(t, events(t, s, tc.f), tc.want, fmt.Sprintf("ListEvents(%+v)", tc.f))
	}
	if last, err := s.LastEventSeq(ctx); err != nil || last != all[9].Seq {
		t.Errorf("LastEventSeq = %d, %v; want %d, the newest event's", last, err, all[9].Seq)
	}
}

func testEventsConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n, m = 8, 25
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got []int64
	)
	for i := range n {
		wg.Go(func() {
			var last int64
			for j := range m {
				evs := []store.Event{ev("shop", "web", fmt.Sprint(i, "-", j, "a")), ev("shop", "web", fmt.Sprint(i, "-", j, "b"))}
				if err := s.AppendEvents(ctx, evs...); err != nil {
					t.Errorf("AppendEvents: %v", err)
					return
				}
				if evs[0].Seq <= last || evs[1].Seq <= evs[0].Seq {
					t.Errorf("writer %d: seqs %v after %d, want increasing", i, seqs(evs), last)
				}
				last = evs[1].Seq
				mu.Lock()
				got = append(got, seqs(evs)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("duplicate seqs among %d appended events", len(got))
	}
	list := events(t, s, store.EventFilter{})
	if len(list) != n*m*2 {
		t.Fatalf("ListEvents = %d events, want %d", len(list), n*m*2)
	}
	if !slices.Equal(seqs(list), got) {
		t.Errorf("listed seqs differ from the assigned ones")
	}
	for i := 1; i < len(list); i++ {
		if list[i].Seq <= list[i-1].Seq {
			t.Fatalf("ListEvents not in seq order at %d: %d after %d", i, list[i].Seq, list[i-1].Seq)
		}
	}
}

// --- context ---

func testCanceled(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: %v, want context.Canceled", what, err)
		}
	}
	_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Hash: "h", Body: []byte(`{}`)})
	check("PutConfig", err)
	check("CreateDesiredState", s.CreateDesiredState(ctx, desiredState("ds-1", "shop", "web", 1)))
	check("Write", s.Write(ctx, &store.Batch{Instances: []store.Instance{instance("shop", "web", "production")}}))
	check("AppendEvents", s.AppendEvents(ctx, ev("shop", "web", "x")))
	_, err = s.RecordRun(ctx, taskRun("shop", "web", "production", "apply", 1))
	check("RecordRun", err)
	_, err = s.GetConfig(ctx, "service", "shop/web")
	check("GetConfig", err)
	_, err = s.ListEvents(ctx, store.EventFilter{})
	check("ListEvents", err)
	_, err = s.ListInstances(ctx, "", "")
	check("ListInstances", err)
	_, err = s.ListRuns(ctx, store.RunFilter{})
	check("ListRuns", err)
	_, err = s.GetRun(ctx, 1)
	check("GetRun", err)

	// Nothing was written.
	bg := t.Context()
	if _, err := s.GetConfig(bg, "service", "shop/web"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetConfig after a canceled PutConfig: %v", err)
	}
	if _, err := s.GetDesiredState(bg, "ds-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetDesiredState after a canceled create: %v", err)
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Errorf("canceled appends wrote %d events", len(evs))
	}
	if runs := listRuns(t, s, store.RunFilter{}); len(runs) != 0 {
		t.Errorf("a canceled RecordRun wrote %d runs", len(runs))
	}
}

func testCheckHealthy(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.Check(ctx))
	create(t, s, desiredState("ds-1", "shop", "web", 1), ev("shop", "web", "pushed"))
	write(t, s, instance("shop", "web", "production"))
	must(t, s.Check(ctx))
}

// pushes creates desired states prefix-from..prefix-(to-1) of app/svc, each
// with its own compiled copy, and returns their ids.
func pushes(t *testing.T, s store.Store, app, svc, prefix string, from, to int) []string {
	t.Helper()
	var out []string
	for i := from; i < to; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		create(t, s, desiredState(id, app, svc, i), ev(app, svc, "pushed"))
		out = append(out, id)
	}
	return out
}

// testB10Retention: superseded desired states beyond the bound lose their
// compiled copy, except those instances need; records, approvals and events stay.
func testB10Retention(t *testing.T, s store.Store) {
	ctx := t.Context()
	n := store.DefaultKeepSuperseded
	// The instance converges on ds-2, targets ds-3 and can roll back to ds-1.
	inst := instance("shop", "web", "production")
	inst.DesiredStateID, inst.TargetStateID, inst.CurrentStateID = "ds-late", "ds-3", "ds-2"
	inst.PreviousStateID, inst.Satisfied = "ds-1", []string{"x"}
	write(t, s, inst)
	other := instance("shop", "web", "canary")
	other.DesiredStateID, other.TargetStateID, other.CurrentStateID, other.PreviousStateID = "ds-late", "", "", ""
	write(t, s, other)
	pushes(t, s, "shop", "api", "api", 0, 3)
	ids := pushes(t, s, "shop", "web", "ds", 0, n+11) // ds-0 .. ds-(n+10); the last is active
	must(t, addApproval(ctx, s, approval("ds-0", "production", "alice"), ev("shop", "web", "approved")))
	create(t, s, desiredState("ds-late", "shop", "web", n+11), ev("shop", "web", "pushed"))
	ids = append(ids, "ds-late")

	keptWhole := map[string]bool{"ds-1": true, "ds-2": true, "ds-3": true}
	for _, id := range ids[len(ids)-1-n:] { // the newest n superseded and the active one
		keptWhole[id] = true
	}
	for i, id := range ids {
		got, err := s.GetDesiredState(ctx, id)
		must(t, err)
		want := desiredState(id, "shop", "web", i)
		if id == "ds-late" {
			want = desiredState(id, "shop", "web", n+11)
		}
		if keptWhole[id] {
			if !bytes.Equal(canonicalJSON(got.Compiled), canonicalJSON(want.Compiled)) || !got.PrunedAt.IsZero() {
				t.Errorf("%s: Compiled %s, PrunedAt %v; want it kept whole", id, got.Compiled, got.PrunedAt)
			}
			continue
		}
		if got.Compiled != nil || got.PrunedAt.IsZero() {
			t.Errorf("%s: Compiled %q, PrunedAt %v; want it pruned (beyond the newest %d and unreferenced)", id, got.Compiled, got.PrunedAt, n)
		}
		if got.Version != want.Version || got.ReplacedBy == "" || got.CreatedBy != want.CreatedBy {
			t.Errorf("%s: the record of a pruned desired state changed: %+v", id, got)
		}
	}
	list, err := s.ListDesiredStates(ctx, "shop", "web", 0)
	must(t, err)
	if len(list) != len(ids) {
		t.Errorf("ListDesiredStates = %d records, want %d (records stay)", len(list), len(ids))
	}
	approvals, err := s.ListApprovals(ctx, "ds-0")
	must(t, err)
	if len(approvals) != 1 {
		t.Errorf("approvals of a pruned desired state = %v, want the one recorded", approvals)
	}
	if evs := events(t, s, store.EventFilter{Application: "shop", Service: "web"}); len(evs) != len(ids)+1 {
		t.Errorf("events = %d, want %d (events are history and stay)", len(evs), len(ids)+1)
	}
	for _, id := range []string{"api-0", "api-1", "api-2"} {
		got, err := s.GetDesiredState(ctx, id)
		must(t, err)
		if got.Compiled == nil || !got.PrunedAt.IsZero() {
			t.Errorf("%s of another service was pruned", id)
		}
	}
}

// testB10IdenticalPush: a push identical to the active desired state reads
// back its compiled copy, also after the first of the two was superseded
// beyond the retention bound while the second is still needed.
func testB10IdenticalPush(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := desiredState("ds-a", "shop", "web", 1)
	second := desiredState("ds-b", "shop", "web", 1)
	second.ID, second.Params = "ds-b", []byte(`{"replicas": 4}`)
	create(t, s, first, ev("shop", "web", "pushed"))
	create(t, s, second, ev("shop", "web", "pushed"))
	for _, want := range []store.DesiredState{first, second} {
		got, err := s.GetDesiredState(ctx, want.ID)
		must(t, err)
		if want.ID == "ds-a" {
			want.ReplacedBy = "ds-b"
		}
		same(t, got, want, "identical push "+want.ID)
	}
	inst := instance("shop", "web", "production")
	inst.DesiredStateID, inst.TargetStateID, inst.CurrentStateID, inst.PreviousStateID = "ds-b", "ds-b", "ds-b", ""
	write(t, s, inst)
	pushes(t, s, "shop", "web", "ds", 2, store.DefaultKeepSuperseded+4)
	got, err := s.GetDesiredState(ctx, "ds-b")
	must(t, err)
	if !bytes.Equal(canonicalJSON(got.Compiled), canonicalJSON(second.Compiled)) || !got.PrunedAt.IsZero() {
		t.Errorf("ds-b (still current) lost its compiled copy: %q, pruned at %v", got.Compiled, got.PrunedAt)
	}
}

// testPruneEvents: PruneEvents deletes the events up to a seq, never the
// newest one, and seqs go on after it.
func testPruneEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	if n, err := s.PruneEvents(ctx, 100); err != nil || n != 0 {
		t.Errorf("PruneEvents of an empty store = %d, %v", n, err)
	}
	evs := make([]store.Event, 5)
	for i := range evs {
		evs[i] = ev("shop", "web", "pushed")
	}
	must(t, s.AppendEvents(ctx, evs...))
	n, err := s.PruneEvents(ctx, evs[2].Seq)
	must(t, err)
	if n != 3 {
		t.Errorf("PruneEvents through the third = %d, want 3", n)
	}
	if left := events(t, s, store.EventFilter{}); len(left) != 2 || left[0].Seq != evs[3].Seq {
		t.Errorf("left after pruning: %v", left)
	}
	// Through the newest: all but it.
	n, err = s.PruneEvents(ctx, evs[4].Seq+10)
	must(t, err)
	if n != 1 {
		t.Errorf("PruneEvents through the end = %d, want 1", n)
	}
	if left := events(t, s, store.EventFilter{}); len(left) != 1 || left[0].Seq != evs[4].Seq {
		t.Errorf("left after pruning through the end: %v", left)
	}
	if last, err := s.LastEventSeq(ctx); err != nil || last != evs[4].Seq {
		t.Errorf("LastEventSeq after pruning = %d, %v; want %d", last, err, evs[4].Seq)
	}
	next := ev("shop", "web", "pushed")
	must(t, s.AppendEvents(ctx, next))
	if all := events(t, s, store.EventFilter{}); len(all) != 2 || all[1].Seq <= evs[4].Seq {
		t.Errorf("after pruning and appending: %v", all)
	}
}
