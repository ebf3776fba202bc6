package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
)

// notifyTests are the conformance cases of notifications.
var notifyTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Notify/Targets", testNotifyTargets},
	{"Notify/FanOutWithEvents", testNotifyFanOut},
	{"Notify/OrderPerKey", testNotifyOrder},
	{"Notify/ClaimExpiresAndFences", testNotifyClaimExpiry},
	{"Notify/DeadRetryPrune", testNotifyDeadRetry},
	{"Notify/ConcurrentClaimsOnce", testNotifyConcurrentClaims},
	{"Notify/PruneEventsKeepsUndelivered", testNotifyPruneKeepsUndelivered},
}

func hook(name string, f store.NotifyFilter) store.NotifyTarget {
	return store.NotifyTarget{Name: name, Kind: store.NotifyWebhook, Filter: f, Spec: []byte(`{"url":"http://127.0.0.1:1/x","secret":"s3cr3t"}`)}
}

func converged(app, svc, rc, version, previous string) store.Event {
	data := fmt.Sprintf(`{"version":%q,"previousVersion":%q}`, version, previous)
	return store.Event{Application: app, Service: svc, ReleaseChannel: rc, Type: ds.EventConverged, Message: rc + ": " + version + " converged", Data: []byte(data)}
}

func testNotifyTargets(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutNotifyTarget(ctx, hook("ci", store.NotifyFilter{Types: []string{state.NotifyServiceDeployed}, Applications: []string{"shop"}})))
	must(t, s.PutNotifyTarget(ctx, store.NotifyTarget{Name: "shop-slack", Kind: store.NotifySlack, Source: "config", CreatedBy: "alice", CreatedAt: ts(1)}))
	got, err := s.GetNotifyTarget(ctx, "ci")
	must(t, err)
	if string(got.Spec) != `{"url":"http://127.0.0.1:1/x","secret":"s3cr3t"}` || got.Filter.Types[0] != state.NotifyServiceDeployed ||
		got.Filter.Applications[0] != "shop" || len(got.Filter.Channels) != 0 || got.CreatedAt.IsZero() {
		t.Errorf("get ci: %+v", got)
	}
	// Replacing keeps one target.
	must(t, s.PutNotifyTarget(ctx, hook("ci", store.NotifyFilter{Channels: []string{"prod"}})))
	list, err := s.ListNotifyTargets(ctx)
	must(t, err)
	if len(list) != 2 || list[0].Name != "ci" || list[1].Name != "shop-slack" || len(list[0].Filter.Types) != 0 || list[0].Filter.Channels[0] != "prod" {
		t.Errorf("list: %+v", list)
	}
	if list[1].Source != "config" || list[1].CreatedBy != "alice" || !list[1].CreatedAt.Equal(ts(1)) {
		t.Errorf("slack target: %+v", list[1])
	}
	for _, bad := range []store.NotifyTarget{
		{Name: "Bad Name", Kind: store.NotifyWebhook},
		{Name: "x", Kind: "email"},
		hook("y", store.NotifyFilter{Types: []string{"service.exploded"}}),
		hook("z", store.NotifyFilter{Applications: []string{"a,b"}}),
		hook("w", store.NotifyFilter{Statuses: []string{"HAPPY"}}),
	} {
		if err := s.PutNotifyTarget(ctx, bad); err == nil {
			t.Errorf("put %+v: no error", bad)
		}
	}
	must(t, s.DeleteNotifyTarget(ctx, "ci"))
	wantErr(t, s.DeleteNotifyTarget(ctx, "ci"), store.ErrNotFound, "delete again")
	_, err = s.GetNotifyTarget(ctx, "ci")
	wantErr(t, err, store.ErrNotFound, "get deleted")
}

func testNotifyFanOut(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutNotifyTarget(ctx, hook("all", store.NotifyFilter{})))
	must(t, s.PutNotifyTarget(ctx, hook("prod-failures", store.NotifyFilter{Types: []string{state.NotifyChannelFailed}, Channels: []string{"prod"}})))
	must(t, s.PutNotifyTarget(ctx, hook("other-app", store.NotifyFilter{Applications: []string{"blog"}})))
	must(t, s.PutNotifyTarget(ctx, hook("waiting", store.NotifyFilter{Statuses: []string{string(ds.StatusWaitingManualApproval)}})))
	// Events through every path that appends them: AppendEvents and a batch.
	must(t, s.AppendEvents(ctx,
		store.Event{Application: "shop", Service: "web", ReleaseChannel: "staging", Type: ds.EventApplying, Message: "applying"},
		converged("shop", "web", "staging", "v1", ""),
		store.Event{Application: "shop", Service: "web", ReleaseChannel: "prod", Type: ds.EventFailed, Message: "prod: v1 failed"},
	))
	must(t, s.Write(ctx, &store.Batch{Events: []store.Event{
		{Application: "shop", Service: "web", ReleaseChannel: "prod", Type: ds.EventApprovalRequested, Message: "waiting for approval"},
		converged("shop", "web", "prod", "v2", "v1"),
	}}))
	got, err := s.ListDeliveries(ctx, store.DeliveryFilter{})
	must(t, err)
	var lines []string
	for i := len(got) - 1; i >= 0; i-- {
		d := got[i]
		if d.State != store.DeliveryPending || d.Attempts != 0 || d.NextAt.IsZero() || d.CreatedAt.IsZero() || d.Event.Seq != d.EventSeq {
			t.Errorf("delivery %+v", d)
		}
		lines = append(lines, d.Target+" "+d.Type+" "+d.Event.ReleaseChannel)
	}
	want := []string{
		"all service.deployed staging",
		"all channel.failed prod", "prod-failures channel.failed prod",
		"all approval.requested prod", "waiting approval.requested prod",
		"all service.upgraded prod",
	}
	if fmt.Sprint(sortedByTarget(lines, want)) != fmt.Sprint(want) {
		t.Errorf("deliveries:\n got %q\nwant %q", lines, want)
	}
	counts, err := s.CountDeliveries(ctx)
	must(t, err)
	total := 0
	for _, c := range counts {
		total += c.Count
		if c.State != store.DeliveryPending {
			t.Errorf("count %+v", c)
		}
	}
	if total != len(want) {
		t.Errorf("counted %d deliveries, want %d", total, len(want))
	}
	// Deleting a target drops what it has not delivered.
	must(t, s.DeleteNotifyTarget(ctx, "all"))
	got, err = s.ListDeliveries(ctx, store.DeliveryFilter{Target: "all"})
	must(t, err)
	if len(got) != 0 {
		t.Errorf("deleted target keeps %d deliveries", len(got))
	}
}

// sortedByTarget puts got in want's order when it holds the same lines:
// the deliveries of one event may come in any order of targets.
func sortedByTarget(got, want []string) []string {
	if len(got) != len(want) {
		return got
	}
	left := map[string]int{}
	for _, g := range got {
		left[g]++
	}
	for _, w := range want {
		if left[w] == 0 {
			return got
		}
		left[w]--
	}
	return want
}

func testNotifyOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutNotifyTarget(ctx, hook("ci", store.NotifyFilter{})))
	must(t, s.AppendEvents(ctx,
		converged("shop", "web", "staging", "v1", ""),
		converged("shop", "api", "staging", "v1", ""),
		converged("shop", "web", "prod", "v1", ""),
	))
	now := soon()
	first, err := s.ClaimDeliveries(ctx, "a", now, time.Minute, 10)
	must(t, err)
	// One per service: web's second waits for its first.
	if len(first) != 2 || first[0].Event.Service != "web" || first[0].Event.ReleaseChannel != "staging" || first[1].Event.Service != "api" {
		t.Fatalf("first claim: %+v", first)
	}
	if first[0].Attempts != 1 || first[0].Owner != "a" || !first[0].ClaimedUntil.Equal(now.Add(time.Minute)) {
		t.Errorf("claimed %+v", first[0])
	}
	again, err := s.ClaimDeliveries(ctx, "b", now, time.Minute, 10)
	must(t, err)
	if len(again) != 0 {
		t.Errorf("claimed while held: %+v", again)
	}
	// A failed attempt keeps the order: web prod still waits.
	must(t, s.FinishDelivery(ctx, "a", store.DeliveryResult{ID: first[0].ID, Error: "connection refused", RetryAt: now.Add(time.Second), At: now}))
	must(t, s.FinishDelivery(ctx, "a", store.DeliveryResult{ID: first[1].ID, Delivered: true, At: now}))
	none, err := s.ClaimDeliveries(ctx, "b", now, time.Minute, 10)
	must(t, err)
	if len(none) != 0 {
		t.Errorf("claimed before the retry is due: %+v", none)
	}
	retry, err := s.ClaimDeliveries(ctx, "b", now.Add(time.Second), time.Minute, 10)
	must(t, err)
	if len(retry) != 1 || retry[0].ID != first[0].ID || retry[0].Attempts != 2 || retry[0].LastError != "connection refused" {
		t.Fatalf("retry: %+v", retry)
	}
	must(t, s.FinishDelivery(ctx, "b", store.DeliveryResult{ID: retry[0].ID, Delivered: true, At: now.Add(time.Second)}))
	next, err := s.ClaimDeliveries(ctx, "b", now.Add(time.Second), time.Minute, 10)
	must(t, err)
	if len(next) != 1 || next[0].Event.ReleaseChannel != "prod" {
		t.Fatalf("next: %+v", next)
	}
	delivered, err := s.ListDeliveries(ctx, store.DeliveryFilter{States: []store.DeliveryState{store.DeliveryDelivered}})
	must(t, err)
	if len(delivered) != 2 || delivered[0].DeliveredAt.IsZero() || delivered[0].ID < delivered[1].ID {
		t.Errorf("delivered, newest first: %+v", delivered)
	}
}

func testNotifyClaimExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutNotifyTarget(ctx, hook("ci", store.NotifyFilter{})))
	must(t, s.AppendEvents(ctx, converged("shop", "web", "staging", "v1", "")))
	now := soon()
	a, err := s.ClaimDeliveries(ctx, "a", now, time.Second, 10)
	must(t, err)
	if len(a) != 1 {
		t.Fatalf("claim: %+v", a)
	}
	// a died: its claim expires and b takes the delivery.
	b, err := s.ClaimDeliveries(ctx, "b", now.Add(time.Second), time.Minute, 10)
	must(t, err)
	if len(b) != 1 || b[0].ID != a[0].ID || b[0].Attempts != 2 || b[0].Owner != "b" {
		t.Fatalf("claim after expiry: %+v", b)
	}
	err = s.FinishDelivery(ctx, "a", store.DeliveryResult{ID: a[0].ID, Delivered: true, At: now})
	wantErr(t, err, store.ErrConflict, "finish by the owner that lost the claim")
	must(t, s.FinishDelivery(ctx, "b", store.DeliveryResult{ID: b[0].ID, Delivered: true, At: now}))
	err = s.FinishDelivery(ctx, "b", store.DeliveryResult{ID: b[0].ID, Delivered: true, At: now})
	wantErr(t, err, store.ErrConflict, "finish twice")
}

func testNotifyDeadRetry(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutNotifyTarget(ctx, hook("ci", store.NotifyFilter{})))
	must(t, s.PutNotifyTarget(ctx, hook("other", store.NotifyFilter{})))
	must(t, s.AppendEvents(ctx, converged("shop", "web", "staging", "v1", ""), converged("shop", "web", "prod", "v1", "")))
	now := soon()
	claimed, err := s.ClaimDeliveries(ctx, "a", now, time.Minute, 10)
	must(t, err)
	if len(claimed) != 2 {
		t.Fatalf("claim: %+v", claimed)
	}
	for _, d := range claimed {
		must(t, s.FinishDelivery(ctx, "a", store.DeliveryResult{ID: d.ID, Error: "HTTP 500", Dead: true, At: now}))
	}
	// A dead delivery no longer holds back the next one of its service.
	next, err := s.ClaimDeliveries(ctx, "a", now, time.Minute, 10)
	must(t, err)
	if len(next) != 2 || next[0].Event.ReleaseChannel != "prod" {
		t.Fatalf("after dead: %+v", next)
	}
	for _, d := range next {
		must(t, s.FinishDelivery(ctx, "a", store.DeliveryResult{ID: d.ID, Delivered: true, At: now}))
	}
	dead, err := s.ListDeliveries(ctx, store.DeliveryFilter{States: []store.DeliveryState{store.DeliveryDead}})
	must(t, err)
	if len(dead) != 2 || dead[0].LastError != "HTTP 500" {
		t.Fatalf("dead: %+v", dead)
	}
	n, err := s.RetryDeliveries(ctx, "ci", nil, now.Add(time.Minute))
	must(t, err)
	if n != 1 {
		t.Errorf("retried %d, want 1 (ci's)", n)
	}
	again, err := s.ClaimDeliveries(ctx, "a", now.Add(time.Minute), time.Minute, 10)
	must(t, err)
	if len(again) != 1 || again[0].Target != "ci" || again[0].Attempts != 1 {
		t.Fatalf("retried claim: %+v", again)
	}
	n, err = s.RetryDeliveries(ctx, "", []int64{dead[0].ID, dead[1].ID}, now)
	must(t, err)
	if n != 1 {
		t.Errorf("retried %d by id, want 1 (the other is pending)", n)
	}
	pruned, err := s.PruneDeliveries(ctx, now.Add(time.Second))
	must(t, err)
	if pruned != 2 {
		t.Errorf("pruned %d, want the 2 delivered", pruned)
	}
}

func testNotifyConcurrentClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutNotifyTarget(ctx, hook("ci", store.NotifyFilter{})))
	const services = 20
	for i := range services {
		must(t, s.AppendEvents(ctx, converged("shop", fmt.Sprint("svc", i), "staging", "v1", ""), converged("shop", fmt.Sprint("svc", i), "prod", "v1", "")))
	}
	at := soon()
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("w", w)
			for range 50 {
				got, err := s.ClaimDeliveries(ctx, owner, at, time.Hour, 3)
				if err != nil {
					errs <- err
					return
				}
				for _, d := range got {
					mu.Lock()
					if prev, ok := seen[d.ID]; ok {
						errs <- fmt.Errorf("delivery %d claimed by %s and %s", d.ID, prev, owner)
					}
					seen[d.ID] = owner
					mu.Unlock()
					if err := s.FinishDelivery(ctx, owner, store.DeliveryResult{ID: d.ID, Delivered: true, At: at}); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, store.ErrConflict) {
			t.Error(err)
		}
	}
	if len(seen) != 2*services {
		t.Errorf("%d deliveries claimed, want %d", len(seen), 2*services)
	}
}

// soon is a time after the deliveries made now are due, whole seconds (as
// every store keeps them).
func soon() time.Time { return time.Now().Add(time.Minute).Truncate(time.Second).UTC() }

func testNotifyPruneKeepsUndelivered(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.PutNotifyTarget(ctx, hook("ci", store.NotifyFilter{})))
	evs := []store.Event{converged("shop", "web", "staging", "v1", ""), converged("shop", "api", "staging", "v1", ""),
		{Application: "shop", Service: "web", Type: ds.EventApplying, Message: "x"}}
	must(t, s.AppendEvents(ctx, evs...))
	got, err := s.ClaimDeliveries(ctx, "a", soon(), time.Minute, 10)
	must(t, err)
	for _, d := range got {
		if d.Event.Service == "api" {
			must(t, s.FinishDelivery(ctx, "a", store.DeliveryResult{ID: d.ID, Delivered: true, At: soon()}))
		}
	}
	n, err := s.PruneEvents(ctx, evs[2].Seq)
	must(t, err)
	if n != 1 {
		t.Errorf("pruned %d events, want 1 (api's, delivered; web's is pending, the last is the history's end)", n)
	}
	pending, err := s.ListDeliveries(ctx, store.DeliveryFilter{States: []store.DeliveryState{store.DeliveryPending}})
	must(t, err)
	if len(pending) != 1 || pending[0].Event.Message != evs[0].Message {
		t.Errorf("pending after prune: %+v", pending)
	}
}
