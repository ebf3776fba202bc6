package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/notify"
	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

const secret = "unit-test-secret-0123456789"

// receiver is a webhook on loopback that answers with status (a func of
// the request count), checks signatures and keeps the CloudEvents.
type receiver struct {
	srv    *httptest.Server
	calls  atomic.Int64
	status func(n int64) int
	mu     sync.Mutex
	got    []cloudevents.Event
	bad    int
}

func newReceiver(t testing.TB, status func(n int64) int) *receiver {
	r := &receiver{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := r.calls.Add(1)
		body, _ := io.ReadAll(req.Body)
		if code := r.status(n); code != http.StatusOK {
			if code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "7")
			}
			w.WriteHeader(code)
			return
		}
		ev := cloudevents.NewEvent()
		err := json.Unmarshal(body, &ev)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil || !notify.Verify(secret, body, req.Header.Get(notify.SignatureHeader)) || req.Header.Get("Content-Type") != "application/cloudevents+json; charset=utf-8" {
			r.bad++
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.got = append(r.got, ev)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func ok(int64) int { return http.StatusOK }

func openStore(t testing.TB) *sqlite.Store {
	st, err := sqlite.Open(context.Background(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func addHook(t testing.TB, st store.Store, name, url string, f store.NotifyFilter) {
	spec, _ := json.Marshal(notify.WebhookSpec{URL: url, Secret: secret})
	if err := st.PutNotifyTarget(context.Background(), store.NotifyTarget{Name: name, Kind: store.NotifyWebhook, Spec: spec, Filter: f}); err != nil {
		t.Fatal(err)
	}
}

func convergedEvent(svc, rc, version, prev string) store.Event {
	data, _ := json.Marshal(state.ConvergedData{Version: version, PreviousVersion: prev})
	return store.Event{Application: "shop", Service: svc, ReleaseChannel: rc, Type: ds.EventConverged, Actor: "engine", Message: rc + ": " + version + " converged", Data: data}
}

func dispatcher(st store.Store, clock *fakeClock, cfg notify.Config) *notify.Dispatcher {
	cfg.Store, cfg.Owner = st, "test"
	cfg.Senders = map[string]notify.Sender{store.NotifyWebhook: &notify.Webhook{Source: "https://drover.example.com"}}
	if clock != nil {
		cfg.Now = clock.now
	}
	return notify.New(cfg)
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func deliveries(t *testing.T, st store.Store, states ...store.DeliveryState) []store.Delivery {
	t.Helper()
	list, err := st.ListDeliveries(context.Background(), store.DeliveryFilter{States: states, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestDeliverSigned: each event goes out once as a valid CloudEvent, signed,
// with the event's seq as its id and CDEvents' type for deployments.
func TestDeliverSigned(t *testing.T) {
	st := openStore(t)
	r := newReceiver(t, ok)
	addHook(t, st, "ci", r.srv.URL, store.NotifyFilter{})
	evs := []store.Event{convergedEvent("web", "staging", "v1", ""), convergedEvent("web", "prod", "v2", "v1"),
		{Application: "shop", Service: "web", ReleaseChannel: "prod", Type: ds.EventApprovalRequested, Message: "waiting for approval"}}
	if err := st.AppendEvents(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	d := dispatcher(st, nil, notify.Config{})
	for range 3 { // one per service at a time
		if _, err := d.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if r.bad > 0 || len(r.got) != 3 {
		t.Fatalf("%d good, %d bad requests", len(r.got), r.bad)
	}
	want := []string{"dev.cdevents.service.deployed.0.2.0", "dev.cdevents.service.upgraded.0.2.0", "dev.drover.approval.requested.0.1.0"}
	for i, ev := range r.got {
		if ev.Type() != want[i] || ev.ID() != strconv.FormatInt(evs[i].Seq, 10) || ev.Source() != "https://drover.example.com/apps/shop/services/web" {
			t.Errorf("event %d: %s %s %s", i, ev.Type(), ev.ID(), ev.Source())
		}
		if err := ev.Validate(); err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	if left := deliveries(t, st, store.DeliveryPending); len(left) != 0 {
		t.Errorf("pending after delivery: %+v", left)
	}
}

// TestRetryThenDead: failures are retried with a growing backoff; after
// the most attempts the delivery is dead and the next one of the service
// goes out; 429 waits for Retry-After.
func TestRetryThenDead(t *testing.T) {
	st := openStore(t)
	r := newReceiver(t, func(int64) int { return http.StatusInternalServerError })
	addHook(t, st, "ci", r.srv.URL, store.NotifyFilter{})
	if err := st.AppendEvents(context.Background(), convergedEvent("web", "staging", "v1", ""), convergedEvent("web", "prod", "v1", "")); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	d := dispatcher(st, clock, notify.Config{MaxAttempts: 3, MaxBackoff: 4 * time.Second})
	var waits []time.Duration
	for attempt := 1; attempt <= 3; attempt++ {
		n, err := d.Once(context.Background())
		if err != nil || n != 1 {
			t.Fatalf("attempt %d: claimed %d, %v", attempt, n, err)
		}
		list := deliveries(t, st)
		first := list[len(list)-1]
		if attempt < 3 {
			if first.State != store.DeliveryPending || first.LastError == "" || first.Attempts != attempt {
				t.Fatalf("after attempt %d: %+v", attempt, first)
			}
			waits = append(waits, first.NextAt.Sub(clock.now()))
			if again, _ := d.Once(context.Background()); again != 0 {
				t.Fatalf("claimed before the backoff passed")
			}
			clock.add(first.NextAt.Sub(clock.now()) + time.Millisecond)
		} else if first.State != store.DeliveryDead || first.LastError != "POST "+r.srv.URL+": HTTP 500" {
			t.Fatalf("after the last attempt: %+v", first)
		}
	}
	if waits[0] < time.Second || waits[1] < 2*time.Second || waits[1] > 3*time.Second {
		t.Errorf("backoff %v, want about 1s then 2s", waits)
	}
	// The dead one no longer holds prod back.
	n, _ := d.Once(context.Background())
	if n != 1 {
		t.Fatalf("prod's delivery not claimed after staging's died")
	}
	r.status = func(int64) int { return http.StatusTooManyRequests }
	clock.add(5 * time.Second)
	if n, _ := d.Once(context.Background()); n != 1 {
		t.Fatal("not retried")
	}
	for _, x := range deliveries(t, st, store.DeliveryPending) {
		if wait := x.NextAt.Sub(clock.now()); wait < 7*time.Second {
			t.Errorf("after 429 with Retry-After 7: due in %s", wait)
		}
	}
}

// TestPermanentAndUnknownTarget: a target whose kind has no sender is dead
// at once, not retried.
func TestPermanentAndUnknownTarget(t *testing.T) {
	st := openStore(t)
	if err := st.PutNotifyTarget(context.Background(), store.NotifyTarget{Name: "chat", Kind: store.NotifySlack, Spec: []byte(`{"channel":"#x"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendEvents(context.Background(), convergedEvent("web", "staging", "v1", "")); err != nil {
		t.Fatal(err)
	}
	d := dispatcher(st, nil, notify.Config{})
	if _, err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	dead := deliveries(t, st, store.DeliveryDead)
	if len(dead) != 1 || dead[0].Attempts != 1 {
		t.Fatalf("dead: %+v", dead)
	}
}

// TestRateDefers: past a target's rate, deliveries wait their turn without
// an attempt counted.
func TestRateDefers(t *testing.T) {
	st := openStore(t)
	r := newReceiver(t, ok)
	addHook(t, st, "ci", r.srv.URL, store.NotifyFilter{})
	var evs []store.Event
	for i := range 30 {
		evs = append(evs, convergedEvent(fmt.Sprint("svc", i), "staging", "v1", ""))
	}
	if err := st.AppendEvents(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	d := dispatcher(st, clock, notify.Config{RatePerMinute: 60, Workers: 1})
	for {
		n, err := d.Once(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if len(r.got) != 20 {
		t.Errorf("%d sent at once, want the burst of 20", len(r.got))
	}
	pending := deliveries(t, st, store.DeliveryPending)
	if len(pending) != 10 {
		t.Fatalf("%d pending, want 10", len(pending))
	}
	for _, p := range pending {
		if p.Attempts != 0 || p.LastError != "" || !p.NextAt.After(clock.now()) {
			t.Errorf("deferred delivery %+v", p)
		}
	}
}

// TestWebhookErrorsHideTheURL: an error names the host, never the path or
// query, which may hold a token.
func TestWebhookErrorsHideTheURL(t *testing.T) {
	w := &notify.Webhook{}
	spec, _ := json.Marshal(notify.WebhookSpec{URL: "http://127.0.0.1:1/hook/SECRETPATH?token=SECRETQUERY", Secret: secret})
	n := notify.Notification{Type: state.NotifyServiceDeployed, Event: convergedEvent("web", "staging", "v1", "")}
	n.Event.Seq = 1
	err := w.Send(context.Background(), store.NotifyTarget{Name: "x", Kind: store.NotifyWebhook, Spec: spec}, n)
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	for _, leak := range []string{"SECRETPATH", "SECRETQUERY", secret} {
		if contains(err.Error(), leak) {
			t.Errorf("error %q shows %s", err, leak)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (s == sub || index(s, sub) >= 0)
}

func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// BenchmarkDeliveries: how many deliveries per second one server sustains
// to a loopback webhook, from a store's outbox (SQLite), 8 at once.
func BenchmarkDeliveries(b *testing.B) {
	st := openStore(b)
	r := newReceiver(b, ok)
	addHook(b, st, "ci", r.srv.URL, store.NotifyFilter{})
	evs := make([]store.Event, 0, b.N)
	for i := range b.N {
		evs = append(evs, convergedEvent(fmt.Sprint("svc", i%64), fmt.Sprint("rc", i), "v1", ""))
	}
	for len(evs) > 0 {
		n := min(len(evs), 500)
		if err := st.AppendEvents(context.Background(), evs[:n]...); err != nil {
			b.Fatal(err)
		}
		evs = evs[n:]
	}
	d := dispatcher(st, nil, notify.Config{RatePerMinute: 1 << 30})
	b.ResetTimer()
	start := time.Now()
	for int(r.calls.Load()) < b.N {
		if _, err := d.Once(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
}
