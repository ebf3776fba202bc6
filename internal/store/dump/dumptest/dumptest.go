// Package dumptest helps test dumps of stores: Fill gives a store some of
// every record through the store.Store API, Snapshot reads back everything
// the API shows, and Compare tells two snapshots apart, so that a test can
// move a store through a dump and check nothing changed:
//
//	dumptest.Fill(t, src) // src opened with a retention bound of dumptest.Keep
//	want := dumptest.Snapshot(t, src)
//	… export src, import into dst …
//	dumptest.Compare(t, want, dumptest.Snapshot(t, dst))
//	dumptest.Continues(t, dst, want)
package dumptest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Keep is the retention bound (KeepSuperseded) the store given to Fill
// must have, so that some desired states are pruned and others kept.
const Keep = 2

// at is a time with nanoseconds, n seconds into the fixture's day.
func at(n int) time.Time {
	return time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC).Add(time.Duration(n)*time.Second + time.Duration(n)*time.Nanosecond)
}

// Fill writes some of every kind of record into s, an empty store opened
// with a retention bound of Keep: configs with several versions, desired
// states of which some are pruned, some share a compiled copy and some
// are kept for an instance, approvals, instances updated several times,
// observations, events with data, task runs with binary output, tasks in
// every status, leases released and claimed again, runtime facts, linked
// runtimes (one with labels and its agent's state, one whose token was
// replaced, one unlinked), API tokens (one revoked and its name given again,
// with roles, an expiry and a last use), audit records, secrets,
// notification targets and deliveries in every state (fillNotifications),
// and a process record and a session (which dumps leave out).
func Fill(t testing.TB, s store.Store) {
	t.Helper()
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Configs: bodies are bytes, whitespace and all.
	for i, body := range []string{"{\"a\": 1}\n", "{\n  \"a\": 2\n}", "\x00\xffnot json"} {
		_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "application", Name: "shop", Body: []byte(body), Hash: fmt.Sprintf("h%d", i), Source: "shop.pvn.yaml"})
		must(err)
	}
	for i := range 2 {
		_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: fmt.Appendf(nil, `{"v":%d}`, i), Hash: fmt.Sprintf("w%d", i)})
		must(err)
	}
	_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "runtime", Name: "k8s", Body: []byte(`{}`), Hash: "k"})
	must(err)

	// An instance references web-1 (its rollback target) before the pushes
	// that would prune it.
	staging := store.Instance{
		Application: "shop", Service: "web", ReleaseChannel: "staging", DesiredStateID: "web-1",
		Status: ds.StatusConverging, PreviousStateID: "web-1", PreviousVersion: "v1",
	}
	b := &store.Batch{Instances: []store.Instance{staging}}
	must(s.Write(ctx, b))
	staging = b.Instances[0]

	// Pushes of shop/web: web-3 and web-6 repeat the compiled form of the
	// active one and share its copy; with Keep = 2, web-2 .. web-5 lose
	// theirs, web-1 keeps it (the instance needs it).
	compiled := []string{`{"c": 1}`, `{"c": 2}`, `{"c": 2}`, `{"c": 4}`, `{"c": 5}`, `{"c": 5}`, `{"c": 7}`}
	for i, c := range compiled {
		id := fmt.Sprintf("web-%d", i+1)
		d := store.DesiredState{
			ID: id, Application: "shop", Service: "web", Version: fmt.Sprintf("v%d", i+1), ConfigVersion: int64(i%2 + 1),
			Compiled: []byte(c), Params: fmt.Appendf(nil, `[{"name":"image","value":"1.%d"}]`, i),
			Rollback: i == 3, CreatedBy: "alice", CreatedAt: at(10 + i),
		}
		if i == 4 {
			d.ReleaseChannels = []string{"staging", "prod"}
		}
		must(s.CreateDesiredState(ctx, d, store.Event{Application: "shop", Service: "web", DesiredStateID: id, Type: "pushed",
			Actor: "alice", Message: "pushed " + id, Data: []byte(`{"version": "` + d.Version + `"}`)}))
	}
	// A second service, with one desired state that has no compiled form.
	must(s.CreateDesiredState(ctx, store.DesiredState{ID: "api-1", Application: "shop", Service: "api", Version: "v1"},
		store.Event{Application: "shop", Service: "api", Type: "pushed", Message: "pushed api-1"}))

	// Approvals, with their events.
	for _, a := range []store.Approval{
		{DesiredStateID: "web-7", Application: "shop", Service: "web", ReleaseChannel: "prod", Topic: "prod", User: "alice", Comment: "lgtm", CreatedAt: at(30)},
		{DesiredStateID: "web-7", Application: "shop", Service: "web", ReleaseChannel: "prod", Topic: "prod", User: "bob", Reject: true, Comment: "not on a friday"},
		{DesiredStateID: "web-2", Application: "shop", Service: "web", ReleaseChannel: "prod", Topic: "prod", User: "carol"},
	} {
		_, err := s.AddApproval(ctx, a.DesiredStateID, func(store.DesiredState, []store.Approval) (store.Approval, []store.Event, error) {
			return a, []store.Event{{Application: "shop", Service: "web", ReleaseChannel: "prod", DesiredStateID: a.DesiredStateID,
				Type: "approved", Actor: a.User, Message: "approved"}}, nil
		})
		must(err)
	}

	// Instances written several times (revisions), with observations,
	// events and tasks in their batches.
	staging.DesiredStateID, staging.TargetStateID, staging.TargetVersion = "web-7", "web-7", "v7"
	staging.CurrentStateID, staging.CurrentVersion, staging.Status = "web-6", "v6", ds.StatusConverged
	staging.Reason, staging.Message, staging.ApplyAttempts = "applied", "converged after 2 attempts", 2
	staging.LastApplyAt, staging.ConvergedAt, staging.AppliedAt = at(40), at(41), at(42)
	staging.DesiredVersion, staging.Satisfied = "v7", []string{"staging@v7", "canary@v7"}
	staging.RollbackFrom, staging.RollbackReason, staging.FailedVersion = "v5", "health check failed", "v5"
	staging.Healed, staging.ActionSeq, staging.ActionPending = 3, 4, true
	prod := store.Instance{Application: "shop", Service: "web", ReleaseChannel: "prod", DesiredStateID: "web-7",
		Status: ds.StatusWaitingManualApproval, Paused: true, UpdatedAt: at(43)}
	api := store.Instance{Application: "shop", Service: "api", ReleaseChannel: "staging", DesiredStateID: "api-1", Status: ds.StatusPending}
	b = &store.Batch{
		Instances: []store.Instance{staging, prod, api},
		Observations: []store.Observation{
			{Application: "shop", Service: "web", ReleaseChannel: "staging", DesiredStateID: "web-7", TargetVersion: "v7",
				Version: "v6", Converged: true, Drifted: true, Message: "3/3 ready", Since: at(44),
				Objects: []store.ObservedObject{{ObjectType: "Deployment", Namespace: "shop", Name: "web", Version: "v6",
					Replicas: 3, AvailableReplicas: 3, TargetReplicas: 3, Status: "ready"}},
				Info: []store.ObservedInfo{{Name: "url", Text: "https://web.example"}}},
			{Application: "shop", Service: "web", ReleaseChannel: "prod", Error: "cluster unreachable"},
		},
		Events: []store.Event{
			{Time: at(45), Application: "shop", Service: "web", ReleaseChannel: "staging", Type: "converged", Message: "converged on v6"},
			{Application: "shop", Service: "web", ReleaseChannel: "prod", Type: "paused", Actor: "dave", Message: "paused", Data: []byte{}},
		},
		Tasks: []store.Task{
			{Key: "shop/web", Instance: "staging", Kind: "apply", Payload: []byte(`{"target":"web-7"}`)},
			{Key: "shop/web", Instance: "prod", Kind: "apply", Payload: []byte{0, 1, 2, 0xff}},
			{Key: "shop/api", Instance: "staging", Kind: "apply"},
			{Key: "shop/api", Instance: "prod", Kind: "check"},
		},
	}
	must(s.Write(ctx, b))
	staging, prod = b.Instances[0], b.Instances[1]
	prod.Message = "waiting for an approval"
	b = &store.Batch{Instances: []store.Instance{prod}, Tasks: []store.Task{{Key: "shop/web", Instance: "canary", Kind: "apply"}}}
	must(s.Write(ctx, b))

	// Tasks in every status: succeeded, failed, running (claimed twice),
	// pending after a release, pending never claimed.
	claimed, err := s.ClaimTasks(ctx, "runner-a", time.Hour, 3)
	must(err)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d tasks, want 3", len(claimed))
	}
	must(s.CompleteTask(ctx, claimed[0], store.TaskSucceeded, "applied", &store.Batch{
		Events: []store.Event{{Application: "shop", Service: "web", ReleaseChannel: "staging", Type: "applied", Message: "applied v7"}},
	}))
	must(s.CompleteTask(ctx, claimed[1], store.TaskFailed, "exit status 1", nil))
	must(s.ReleaseTask(ctx, claimed[2], "server shutting down", nil))
	again, err := s.ClaimTasks(ctx, "runner-b", time.Hour, 2)
	must(err)
	if len(again) != 2 {
		t.Fatalf("claimed %d tasks, want 2", len(again))
	}
	must(s.ReleaseTask(ctx, again[1], "handed over", nil))

	// Task runs, with output that is not text.
	for i, r := range []store.TaskRun{
		{Application: "shop", Service: "web", ReleaseChannel: "staging", Runtime: "k8s", Kind: "apply", Version: "v7",
			Command: []string{"helm", "upgrade", "--install", "web"}, ExitCode: 1, Error: "exit status 1",
			StartedAt: at(50), FinishedAt: at(51), Stdout: "ok\n\x00\xff\xfe binary \x80", Stderr: "warning: \xc3\x28", Truncated: true},
		{Application: "shop", Service: "web", ReleaseChannel: "prod", Runtime: "k8s", Kind: "fetch", ExitCode: -1, Error: "timed out"},
		{Application: "shop", Service: "api", ReleaseChannel: "staging", Kind: "getInfo", Stdout: "multi\nline\r\nünïcödé 🚀\n"},
	} {
		if _, err := s.RecordRun(ctx, r); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}

	// Leases: shop/web released by engine-a and claimed by engine-b (token
	// 2), shop/api held by engine-a, shop/old released.
	l, err := s.ClaimLease(ctx, "shop/web", "engine-a", time.Hour)
	must(err)
	must(s.ReleaseLease(ctx, l))
	_, err = s.ClaimLease(ctx, "shop/web", "engine-b", time.Hour)
	must(err)
	_, err = s.ClaimLease(ctx, "shop/api", "engine-a", time.Hour)
	must(err)
	l, err = s.ClaimLease(ctx, "shop/old", "engine-a", time.Hour)
	must(err)
	must(s.ReleaseLease(ctx, l))

	// Runtime facts, standalone events and a process of this host.
	must(s.PutRuntimeFacts(ctx, store.RuntimeFacts{Runtime: "k8s", KubeVersion: "v1.34.1",
		APIVersions: []string{"apps/v1", "apps/v1/Deployment", "v1"}, ObservedAt: at(60)}))
	must(s.PutRuntimeFacts(ctx, store.RuntimeFacts{Runtime: "legacy"}))
	must(s.AppendEvents(ctx, store.Event{Time: at(61), Type: "configured", Actor: "alice", Message: "applied 6 configs", Data: []byte(`{"n": 6}`)}))

	// Linked runtimes: edge with labels and a disconnected agent, lab
	// with a replaced token, old unlinked.
	must(s.LinkRuntime(ctx, store.LinkedRuntime{Name: "edge", Labels: map[string]string{"region": "eu-west", "team": "plätform"},
		TokenHash: tokenHash("edge"), CreatedAt: at(70)}))
	must(s.PutAgentState(ctx, "edge", store.AgentState{Connected: false, Replica: "server-a", Version: "v1.4.2", Mode: "kubernetes",
		Host: "edge-1.internal", ConnectedAt: at(71), HeartbeatAt: at(72), DisconnectedAt: at(73), Error: "connection reset by peer"}))
	must(s.LinkRuntime(ctx, store.LinkedRuntime{Name: "lab", TokenHash: tokenHash("lab")}))
	must(s.SetLinkToken(ctx, "lab", tokenHash("lab, rotated")))
	must(s.PutAgentState(ctx, "lab", store.AgentState{Connected: true, Replica: "server-b", Mode: "commands", ConnectedAt: at(74), HeartbeatAt: at(75)}))
	must(s.LinkRuntime(ctx, store.LinkedRuntime{Name: "old", TokenHash: tokenHash("old")}))
	must(s.UnlinkRuntime(ctx, "old"))

	// API tokens: ci used, revoked and given again (its name is free, its
	// hash is not), with roles, an expiry and a last use; robot with none.
	ci, err := s.CreateAPIToken(ctx, store.APIToken{Name: "ci", Hash: tokenHash("ci"), Roles: []string{"deployer@shop"},
		CreatedBy: "admin", CreatedAt: at(80)})
	must(err)
	must(s.TouchAPIToken(ctx, ci.ID, at(81)))
	_, err = s.RevokeAPIToken(ctx, "ci", "alice ü")
	must(err)
	ci, err = s.CreateAPIToken(ctx, store.APIToken{Name: "ci", Hash: tokenHash("ci, again"),
		Roles: []string{"viewer", "deployer@shop", "approver@shop/prod"}, CreatedBy: "alice ü", CreatedAt: at(82), ExpiresAt: at(1000)})
	must(err)
	must(s.TouchAPIToken(ctx, ci.ID, at(83)))
	_, err = s.CreateAPIToken(ctx, store.APIToken{Name: "robot", Hash: tokenHash("robot")})
	must(err)

	// Audit records: with every field set, a refusal, one timed by the store.
	for _, r := range []store.AuditRecord{
		{Time: at(90), Identity: "alice ü", IdentityKind: "local", Source: "192.0.2.7:51234", Action: "POST /v1/tokens",
			Target: "ci", Status: 201, Outcome: "ok"},
		{Time: at(91), Identity: "ci", IdentityKind: "token", Source: "[2001:db8::1]:50000",
			Action: "POST /v1/apps/{app}/services/{svc}:approve", Application: "shop", Service: "web", ReleaseChannel: "prod",
			Target: "approval", Status: 403, Outcome: "permission_denied", Message: "ci lacks permission \"approve\" ✗"},
		{Identity: "bob", Action: "DELETE /v1/tokens/{name}", Target: "ci", Status: 200, Outcome: "ok"},
	} {
		_, err := s.AppendAudit(ctx, r)
		must(err)
	}
	_, err = s.AddProcess(ctx, store.Process{Application: "shop", Service: "web", ReleaseChannel: "staging", Runtime: "custom",
		Kind: "apply", Command: []string{"./deploy.sh"}, Handle: []byte(`{"pgid":4242}`)})
	must(err)
	sess, err := s.CreateSession(ctx, store.Session{Hash: tokenHash("alice's session"), Identity: "alice ü", Roles: []string{"viewer"},
		Via: "browser", ExpiresAt: time.Now().Add(time.Hour)})
	must(err)
	must(s.TouchSession(ctx, sess.ID, at(95)))
	// Secrets: two keys, the second version of one deleted (its number
	// stays taken), a value of every byte but NUL.
	var value []byte
	for b := 1; b < 256; b++ {
		value = append(value, byte(b))
	}
	for i, sec := range []store.Secret{
		{Key: "db-password", Value: []byte("hunter2"), CreatedBy: "alice ü", CreatedAt: at(96)},
		{Key: "db-password", Value: value, CreatedBy: "bob", CreatedAt: at(97)},
		{Key: "db-password", Value: []byte("third"), CreatedAt: at(98)},
		{Key: "api.token", Value: []byte("t0k3n"), CreatedBy: "ci", CreatedAt: at(99)},
	} {
		if _, err := s.PutSecret(ctx, sec); err != nil {
			t.Fatalf("secret %d: %v", i, err)
		}
	}
	_, err = s.DeleteSecret(ctx, "db-password", 1)
	must(err)
	fillNotifications(t, s)
}

// The notification targets Fill makes.
const (
	hooksSpec = `{"url":"https://hooks.example/drover","secret":"s3cr3t ü"}`
	slackSpec = `{"channel":"#shop-deploys"}`
)

// fillNotifications gives s notification targets (a webhook whose spec holds
// a secret, with filter lists; an application's Slack channel, from its
// config; one deleted after it delivered everything) and deliveries of
// converged events in every state: delivered (some of the deleted target),
// dead, pending and due later after a failed attempt, pending and claimed
// (by sender-a, for an hour), and pending and due, never attempted (a
// deferred claim).
func fillNotifications(t testing.TB, s store.Store) {
	t.Helper()
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tg := range []store.NotifyTarget{
		{Name: "hooks", Kind: store.NotifyWebhook, Spec: []byte(hooksSpec), CreatedBy: "alice ü", CreatedAt: at(100),
			Filter: store.NotifyFilter{Types: []string{"service.deployed", "service.upgraded"}, Applications: []string{"shop"}, Services: []string{"web", "api"}}},
		{Name: "shop-slack", Kind: store.NotifySlack, Spec: []byte(slackSpec), Source: "config", CreatedAt: at(101),
			Filter: store.NotifyFilter{Applications: []string{"shop"}, Channels: []string{"prod"}, Statuses: []string{string(ds.StatusConverged)}}},
		{Name: "gone", Kind: store.NotifyWebhook, Spec: []byte(`{"url":"https://gone.example"}`)},
	} {
		must(s.PutNotifyTarget(ctx, tg))
	}
	converged := func(svc, rc, data string) store.Event {
		return store.Event{Application: "shop", Service: svc, ReleaseChannel: rc, Type: ds.EventConverged,
			Message: rc + " converged", Data: []byte(data)}
	}
	evs := []store.Event{
		converged("web", "prod", `{"version":"v1"}`),
		converged("web", "prod", `{"version":"v2","previousVersion":"v1"}`),
		converged("api", "staging", `{"version":"v1"}`),
	}
	must(s.AppendEvents(ctx, evs...))
	// find is the delivery of the event of evs index i to target among ds.
	find := func(list []store.Delivery, target string, i int) store.Delivery {
		t.Helper()
		for _, d := range list {
			if d.Target == target && d.EventSeq == evs[i].Seq {
				return d
			}
		}
		t.Fatalf("no delivery of event %d to %s among %+v", evs[i].Seq, target, list)
		return store.Delivery{}
	}
	// The first of each target and key: hooks and gone of web and api,
	// shop-slack of web.
	now := time.Now()
	first, err := s.ClaimDeliveries(ctx, "sender-a", now, time.Hour, 10)
	must(err)
	if len(first) != 5 {
		t.Fatalf("claimed %d deliveries, want 5: %+v", len(first), first)
	}
	finish := func(owner string, r store.DeliveryResult) {
		t.Helper()
		r.At = now
		must(s.FinishDelivery(ctx, owner, r))
	}
	finish("sender-a", store.DeliveryResult{ID: find(first, "hooks", 0).ID, Delivered: true})
	finish("sender-a", store.DeliveryResult{ID: find(first, "gone", 0).ID, Delivered: true})
	finish("sender-a", store.DeliveryResult{ID: find(first, "gone", 2).ID, Delivered: true})
	finish("sender-a", store.DeliveryResult{ID: find(first, "shop-slack", 0).ID, Dead: true, Error: "channel_not_found ✗"})
	// hooks' delivery of the api event stays claimed by sender-a.
	second, err := s.ClaimDeliveries(ctx, "sender-b", now, time.Hour, 10)
	must(err)
	if len(second) != 3 {
		t.Fatalf("claimed %d deliveries, want 3: %+v", len(second), second)
	}
	finish("sender-b", store.DeliveryResult{ID: find(second, "hooks", 1).ID, Error: "503 Service Unavailable", RetryAt: now.Add(time.Hour)})
	finish("sender-b", store.DeliveryResult{ID: find(second, "shop-slack", 1).ID, Deferred: true, RetryAt: now.Add(-time.Second)})
	finish("sender-b", store.DeliveryResult{ID: find(second, "gone", 1).ID, Delivered: true})
	must(s.DeleteNotifyTarget(ctx, "gone"))
}

// tokenHash is the hex SHA-256 of a join token, as the store keeps it.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// State is everything the store.Store API shows of a store.
type State struct {
	// Configs are every version of every config, by kind, name and version.
	Configs []store.ConfigObject
	// Active are the active desired states (ListActiveDesiredStates).
	Active []store.DesiredState
	// DesiredStates are each service's desired states, newest first
	// (ListDesiredStates), services in the order of Active.
	DesiredStates []store.DesiredState
	// Approvals are the approvals of each desired state, by its id.
	Approvals    map[string][]store.Approval
	Instances    []store.Instance
	Observations []store.Observation
	Events       []store.Event
	Runs         []store.TaskRun
	Tasks        []store.Task
	Leases       []store.Lease
	Facts        []store.RuntimeFacts
	Linked       []store.LinkedRuntime
	// Tokens are every API token, by id; Audit the whole audit log.
	Tokens []store.APIToken
	Audit  []store.AuditRecord
	// Secrets are every secret version not deleted, with its value.
	Secrets []store.Secret
	// NotifyTargets are every notification target, by name, with its spec
	// opened; Deliveries every delivery, newest first, with its event.
	NotifyTargets []store.NotifyTarget
	Deliveries    []store.Delivery
}

// Snapshot reads everything s shows through the store.Store API (every
// desired state also one by one, every run and task too, to compare the
// single reads with the lists).
func Snapshot(t testing.TB, s store.Store) State {
	t.Helper()
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var st State
	latest, err := s.ListConfigs(ctx)
	must(err)
	for _, c := range latest {
		for v := int64(1); v <= c.Version; v++ {
			got, err := s.GetConfigVersion(ctx, c.Kind, c.Name, v)
			must(err)
			st.Configs = append(st.Configs, got)
		}
		got, err := s.GetConfig(ctx, c.Kind, c.Name)
		must(err)
		if !reflect.DeepEqual(got, c) {
			t.Errorf("GetConfig %s/%s = %+v, ListConfigs says %+v", c.Kind, c.Name, got, c)
		}
	}
	st.Active, err = s.ListActiveDesiredStates(ctx)
	must(err)
	st.Approvals = map[string][]store.Approval{}
	for _, a := range st.Active {
		list, err := s.ListDesiredStates(ctx, a.Application, a.Service, 0)
		must(err)
		for _, d := range list {
			got, err := s.GetDesiredState(ctx, d.ID)
			must(err)
			if !reflect.DeepEqual(got, d) {
				t.Errorf("GetDesiredState %s = %+v, ListDesiredStates says %+v", d.ID, got, d)
			}
			approvals, err := s.ListApprovals(ctx, d.ID)
			must(err)
			if len(approvals) > 0 {
				st.Approvals[d.ID] = approvals
			}
		}
		st.DesiredStates = append(st.DesiredStates, list...)
	}
	st.Instances, err = s.ListInstances(ctx, "", "")
	must(err)
	st.Observations, err = s.ListObservations(ctx, "", "")
	must(err)
	st.Events, err = s.ListEvents(ctx, store.EventFilter{})
	must(err)
	st.Runs, err = s.ListRuns(ctx, store.RunFilter{})
	must(err)
	for _, r := range st.Runs {
		got, err := s.GetRun(ctx, r.ID)
		must(err)
		if !reflect.DeepEqual(got, r) {
			t.Errorf("GetRun %d = %+v, ListRuns says %+v", r.ID, got, r)
		}
	}
	st.Tasks, err = s.ListTasks(ctx, store.TaskFilter{})
	must(err)
	for _, task := range st.Tasks {
		got, err := s.GetTask(ctx, task.ID)
		must(err)
		if !reflect.DeepEqual(got, task) {
			t.Errorf("GetTask %d = %+v, ListTasks says %+v", task.ID, got, task)
		}
	}
	st.Leases, err = s.ListLeases(ctx)
	must(err)
	st.Facts, err = s.ListRuntimeFacts(ctx)
	must(err)
	st.Linked, err = s.ListLinkedRuntimes(ctx)
	must(err)
	for _, r := range st.Linked {
		got, err := s.GetLinkedRuntime(ctx, r.Name)
		must(err)
		if !reflect.DeepEqual(got, r) {
			t.Errorf("GetLinkedRuntime %s = %+v, ListLinkedRuntimes says %+v", r.Name, got, r)
		}
		got, err = s.LinkedRuntimeByToken(ctx, r.TokenHash)
		must(err)
		if !reflect.DeepEqual(got, r) {
			t.Errorf("LinkedRuntimeByToken of %s = %+v, ListLinkedRuntimes says %+v", r.Name, got, r)
		}
	}
	st.Tokens, err = s.ListAPITokens(ctx)
	must(err)
	for _, tok := range st.Tokens {
		got, err := s.APITokenByHash(ctx, tok.Hash)
		must(err)
		if !reflect.DeepEqual(got, tok) {
			t.Errorf("APITokenByHash of token %d = %+v, ListAPITokens says %+v", tok.ID, got, tok)
		}
	}
	st.Audit, err = s.ListAudit(ctx, store.AuditFilter{})
	must(err)
	secrets, err := s.ListSecrets(ctx)
	must(err)
	for _, sec := range secrets {
		got, err := s.GetSecret(ctx, sec.Key, sec.Version)
		must(err)
		st.Secrets = append(st.Secrets, got)
	}
	st.NotifyTargets, err = s.ListNotifyTargets(ctx)
	must(err)
	for _, tg := range st.NotifyTargets {
		got, err := s.GetNotifyTarget(ctx, tg.Name)
		must(err)
		if !reflect.DeepEqual(got, tg) {
			t.Errorf("GetNotifyTarget %s = %+v, ListNotifyTargets says %+v", tg.Name, got, tg)
		}
	}
	st.Deliveries, err = s.ListDeliveries(ctx, store.DeliveryFilter{Limit: 10000})
	must(err)
	return st
}

// Compare fails t for each part of got that differs from want: values,
// times to the nanosecond, bytes byte for byte.
func Compare(t testing.TB, want, got State) {
	t.Helper()
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range wv.NumField() {
		name := wv.Type().Field(i).Name
		w, g := wv.Field(i).Interface(), gv.Field(i).Interface()
		if reflect.DeepEqual(w, g) {
			continue
		}
		t.Errorf("%s differ:\nwant %s\n got %s", name, show(w), show(g))
	}
}

// EmptyBytesAsNil returns st with its empty (non-nil) byte values nil, as
// the SQLite store reads them back: compare a state moved into a SQLite
// store with it.
func EmptyBytesAsNil(st State) State {
	clean := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return b
	}
	out := st
	out.Configs = slices.Clone(st.Configs)
	for i := range out.Configs {
		out.Configs[i].Body = clean(out.Configs[i].Body)
	}
	for _, list := range []*[]store.DesiredState{&out.Active, &out.DesiredStates} {
		*list = slices.Clone(*list)
		for i := range *list {
			(*list)[i].Compiled, (*list)[i].Params = clean((*list)[i].Compiled), clean((*list)[i].Params)
		}
	}
	out.Events = slices.Clone(st.Events)
	for i := range out.Events {
		out.Events[i].Data = clean(out.Events[i].Data)
	}
	out.Tasks = slices.Clone(st.Tasks)
	for i := range out.Tasks {
		out.Tasks[i].Payload = clean(out.Tasks[i].Payload)
	}
	return out
}

// show is v as JSON, for failures (bytes in base64, times to the nanosecond).
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// Continues checks that s, which holds what before shows, goes on after
// it: a new event, task run and task get numbers above every one in
// before, a write fenced by a held lease's token goes through (and one with
// an older token does not), a released lease claimed by a new owner gets a
// higher token, a push replaces the active desired state, a linked
// runtime's name and token hash stay taken, a new API token gets an id above
// every one in before while their hashes (and the names of those not
// revoked) stay taken, a new audit record gets the seq after the last, and
// deliveries go on (continuesDeliveries). It writes to s.
func Continues(t testing.TB, s store.Store, before State) {
	t.Helper()
	ctx := t.Context()
	maxOf := func(ids []int64) int64 {
		if len(ids) == 0 {
			return 0
		}
		return slices.Max(ids)
	}
	var seqs, runs, tasks []int64
	for _, e := range before.Events {
		seqs = append(seqs, e.Seq)
	}
	for _, r := range before.Runs {
		runs = append(runs, r.ID)
	}
	for _, task := range before.Tasks {
		tasks = append(tasks, task.ID)
	}
	evs := []store.Event{{Type: "configured", Message: "after the move"}}
	if err := s.AppendEvents(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if want := maxOf(seqs) + 1; evs[0].Seq != want {
		t.Errorf("the first event after the move has seq %d, want %d", evs[0].Seq, want)
	}
	id, err := s.RecordRun(ctx, store.TaskRun{Application: "shop", Service: "web", ReleaseChannel: "staging", Kind: "fetch"})
	if err != nil {
		t.Fatal(err)
	}
	if id <= maxOf(runs) {
		t.Errorf("the first run after the move has id %d, not above %d", id, maxOf(runs))
	}
	b := &store.Batch{Tasks: []store.Task{{Key: "after/move", Kind: "apply"}}}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b.Tasks[0].ID <= maxOf(tasks) {
		t.Errorf("the first task after the move has id %d, not above %d", b.Tasks[0].ID, maxOf(tasks))
	}
	for _, l := range before.Leases {
		if l.Expires.After(time.Now()) {
			// Held: its holder's fenced writes go on, older tokens stay out.
			if err := s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: l.Key, Token: l.Token}}); err != nil {
				t.Errorf("a write fenced by lease %s token %d after the move: %v", l.Key, l.Token, err)
			}
			err := s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: l.Key, Token: l.Token - 1}})
			if !errors.Is(err, store.ErrFenced) {
				t.Errorf("a write fenced by lease %s token %d (older) after the move: %v, want ErrFenced", l.Key, l.Token-1, err)
			}
			continue
		}
		got, err := s.ClaimLease(ctx, l.Key, "after-the-move", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got.Token <= l.Token {
			t.Errorf("lease %s claimed after the move has token %d, not above %d", l.Key, got.Token, l.Token)
		}
	}
	for _, a := range before.Active {
		id := a.ID + "-next"
		if err := s.CreateDesiredState(ctx, store.DesiredState{ID: id, Application: a.Application, Service: a.Service, Compiled: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		prev, err := s.GetDesiredState(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if prev.ReplacedBy != id {
			t.Errorf("%s replaced by %q after a push, want %q", a.ID, prev.ReplacedBy, id)
		}
		list, err := s.ListDesiredStates(ctx, a.Application, a.Service, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != id {
			t.Errorf("the newest desired state of %s/%s after a push is %v, want %s", a.Application, a.Service, list, id)
		}
	}
	var tokens, audit []int64
	for _, tok := range before.Tokens {
		tokens = append(tokens, tok.ID)
	}
	for _, r := range before.Audit {
		audit = append(audit, r.Seq)
	}
	tok, err := s.CreateAPIToken(ctx, store.APIToken{Name: "after-the-move", Hash: tokenHash("after the move")})
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID <= maxOf(tokens) {
		t.Errorf("the first API token after the move has id %d, not above %d", tok.ID, maxOf(tokens))
	}
	for _, tok := range before.Tokens {
		_, err := s.CreateAPIToken(ctx, store.APIToken{Name: tok.Name + "-new", Hash: tok.Hash})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("a token with the hash of token %d after the move: %v, want ErrConflict", tok.ID, err)
		}
		if !tok.RevokedAt.IsZero() {
			continue
		}
		_, err = s.CreateAPIToken(ctx, store.APIToken{Name: tok.Name, Hash: tok.Hash + "-new"})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("a second token named %s after the move: %v, want ErrConflict", tok.Name, err)
		}
	}
	seq, err := s.AppendAudit(ctx, store.AuditRecord{Identity: "admin", Action: "POST /v1/import", Outcome: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if want := maxOf(audit) + 1; seq != want {
		t.Errorf("the first audit record after the move has seq %d, want %d", seq, want)
	}
	// A deleted secret version's number stays taken after the move.
	if len(before.Secrets) > 0 {
		last := map[string]int64{}
		for _, sec := range before.Secrets {
			last[sec.Key] = max(last[sec.Key], sec.Version)
		}
		for key, n := range last {
			sec, err := s.PutSecret(ctx, store.Secret{Key: key, Value: []byte("after the move")})
			if err != nil || sec.Version != n+1 {
				t.Errorf("the first version of secret %s after the move: %d %v, want %d", key, sec.Version, err, n+1)
			}
		}
	}
	continuesDeliveries(t, s, before)
	for _, r := range before.Linked {
		err := s.LinkRuntime(ctx, store.LinkedRuntime{Name: r.Name, TokenHash: r.TokenHash + "-new"})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("linking %s again after the move: %v, want ErrConflict", r.Name, err)
		}
		err = s.LinkRuntime(ctx, store.LinkedRuntime{Name: r.Name + "-new", TokenHash: r.TokenHash})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("linking a runtime with %s's token hash after the move: %v, want ErrConflict", r.Name, err)
		}
	}
}

// continuesDeliveries checks that the deliveries of s, which holds what
// before shows, go on: a claim held before the move is still its owner's
// (another cannot finish it, its owner can), the next claim takes exactly
// the deliveries due and not claimed that are the oldest pending of their
// target and key, and a new event's deliveries get ids above every one in
// before. It writes to s.
func continuesDeliveries(t testing.TB, s store.Store, before State) {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	key := func(d store.Delivery) string { return d.Target + " " + d.Event.Application + "/" + d.Event.Service }
	oldest := map[string]int64{}
	var maxID int64
	var held []store.Delivery
	for _, d := range before.Deliveries {
		maxID = max(maxID, d.ID)
		if d.State != store.DeliveryPending {
			continue
		}
		if id, ok := oldest[key(d)]; !ok || d.ID < id {
			oldest[key(d)] = d.ID
		}
		if d.Owner != "" && d.ClaimedUntil.After(now) {
			held = append(held, d)
		}
	}
	var due []int64
	attempts := map[int64]int{}
	for _, d := range before.Deliveries {
		if d.State == store.DeliveryPending && oldest[key(d)] == d.ID && !d.NextAt.After(now) && !d.ClaimedUntil.After(now) {
			due = append(due, d.ID)
			attempts[d.ID] = d.Attempts
		}
	}
	slices.Sort(due)
	for _, d := range held {
		err := s.FinishDelivery(ctx, d.Owner+"-not", store.DeliveryResult{ID: d.ID, Delivered: true})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("delivery %d, claimed by %s, finished by another after the move: %v, want ErrConflict", d.ID, d.Owner, err)
		}
	}
	claimed, err := s.ClaimDeliveries(ctx, "after-the-move", now, time.Minute, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, d := range claimed {
		got = append(got, d.ID)
		if d.Owner != "after-the-move" || d.Attempts != attempts[d.ID]+1 || d.Event.Seq != d.EventSeq {
			t.Errorf("delivery %d claimed after the move: %+v", d.ID, d)
		}
	}
	if !slices.Equal(got, due) {
		t.Errorf("deliveries claimed after the move: %v, want %v (the oldest due and not claimed of each target and key)", got, due)
	}
	for _, d := range held {
		if err := s.FinishDelivery(ctx, d.Owner, store.DeliveryResult{ID: d.ID, Delivered: true}); err != nil {
			t.Errorf("delivery %d finished by %s, who claimed it before the move: %v", d.ID, d.Owner, err)
		}
	}
	for _, id := range got {
		if err := s.FinishDelivery(ctx, "after-the-move", store.DeliveryResult{ID: id, Delivered: true}); err != nil {
			t.Errorf("delivery %d claimed after the move, finished: %v", id, err)
		}
	}
	if len(before.NotifyTargets) == 0 {
		return
	}
	evs := []store.Event{{Application: "shop", Service: "web", ReleaseChannel: "prod", Type: ds.EventConverged,
		Message: "after the move", Data: []byte(`{"version":"v9"}`)}}
	if err := s.AppendEvents(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListDeliveries(ctx, store.DeliveryFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range list {
		if d.EventSeq != evs[0].Seq {
			continue
		}
		n++
		if d.ID <= maxID || d.State != store.DeliveryPending {
			t.Errorf("a delivery after the move: %+v, want a pending one with an id above %d", d, maxID)
		}
	}
	if n == 0 {
		t.Errorf("no delivery of an event after the move (targets %+v)", before.NotifyTargets)
	}
	for _, d := range held {
		for _, g := range list {
			if g.ID == d.ID && (g.State != store.DeliveryDelivered || g.Owner != "") {
				t.Errorf("delivery %d after its owner finished it: %+v", d.ID, g)
			}
		}
	}
}

// Lines returns the record lines of a dump (without its header), for
// comparing two dumps of the same state.
func Lines(dump []byte) [][]byte {
	lines := bytes.Split(bytes.TrimSuffix(dump, []byte("\n")), []byte("\n"))
	if len(lines) == 0 {
		return nil
	}
	return lines[1:]
}
