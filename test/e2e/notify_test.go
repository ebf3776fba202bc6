package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/notify"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// hookReceiver is a webhook receiver on loopback, as a CI system would run
// one: it checks each request's signature and parses it with the CloudEvents
// SDK, and keeps what it received in order. It can be stopped and started
// again on the same address.
type hookReceiver struct {
	t      *testing.T
	secret string
	addr   string

	mu   sync.Mutex
	srv  *http.Server
	got  []hookEvent
	bad  []string
	hold func(hookEvent) time.Duration // a wait before answering (nil: none)
	seen chan struct{}
}

// hookEvent is one request the receiver took.
type hookEvent struct {
	ID, Type, Source, Subject string
	Delivery, Attempt         string
	// Payload is drover's part (the CDEvent's customData, or the data).
	Payload notify.Payload
	At      time.Time
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{t: t, secret: "e2e-webhook-secret-0123456789", addr: freeAddr(t), seen: make(chan struct{}, 1)}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *hookReceiver) url() string { return "http://" + h.addr + "/hooks/drover?token=not-shown" }

func (h *hookReceiver) start() {
	h.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the address was ours a moment ago
		if ln, err = net.Listen("tcp", h.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		h.t.Fatalf("receiver: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(h.serve), ReadHeaderTimeout: 5 * time.Second}
	h.mu.Lock()
	h.srv = srv
	h.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (h *hookReceiver) stop() {
	h.mu.Lock()
	srv := h.srv
	h.srv = nil
	h.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !notify.Verify(h.secret, body, r.Header.Get(notify.SignatureHeader)) {
		h.note("bad signature %q on %s", r.Header.Get(notify.SignatureHeader), body)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ev, err := cehttp.NewEventFromHTTPRequest(r)
	if err == nil {
		err = ev.Validate()
	}
	if err != nil {
		h.note("not a CloudEvent: %v: %s", err, body)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var data struct {
		CustomData *notify.Payload `json:"customData"`
		Context    *struct {
			ID string `json:"id"`
		} `json:"context"`
	}
	var p notify.Payload
	if err := json.Unmarshal(ev.Data(), &data); err == nil && data.CustomData != nil {
		p = *data.CustomData
		if data.Context == nil || data.Context.ID != ev.ID() {
			h.note("CDEvent context %+v does not carry the CloudEvent's id %s", data.Context, ev.ID())
		}
	} else if err := json.Unmarshal(ev.Data(), &p); err != nil {
		h.note("data: %v", err)
	}
	he := hookEvent{ID: ev.ID(), Type: ev.Type(), Source: ev.Source(), Subject: ev.Subject(), Delivery: r.Header.Get(notify.DeliveryHeader),
		Attempt: r.Header.Get(notify.AttemptHeader), Payload: p, At: time.Now()}
	h.mu.Lock()
	hold := h.hold
	h.mu.Unlock()
	if hold != nil {
		if d := hold(he); d > 0 {
			time.Sleep(d)
		}
	}
	h.mu.Lock()
	h.got = append(h.got, he)
	h.mu.Unlock()
	select {
	case h.seen <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) note(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bad = append(h.bad, fmt.Sprintf(format, args...))
}

func (h *hookReceiver) events() []hookEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// waitFor waits until the receiver took an event cond accepts, and returns it.
func (h *hookReceiver) waitFor(timeout time.Duration, what string, cond func(hookEvent) bool) hookEvent {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, e := range h.events() {
			if cond(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("webhook: no %s within %s; got %s", what, timeout, h.summary())
		}
		select {
		case <-h.seen:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (h *hookReceiver) summary() string {
	var lines []string
	for _, e := range h.events() {
		lines = append(lines, fmt.Sprintf("%s %s %s (%s)", e.ID, e.Payload.Type, e.Subject, e.Payload.Message))
	}
	return "[" + strings.Join(lines, "; ") + "]"
}

// checkClean fails the test for any request the receiver refused.
func (h *hookReceiver) checkClean() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bad {
		h.t.Error("webhook:", b)
	}
}

func is(typ, rc string) func(hookEvent) bool {
	return func(e hookEvent) bool { return e.Payload.Type == typ && e.Payload.ReleaseChannel == rc }
}

// addHook adds the receiver as webhook name through the CLI.
func (h *hookReceiver) addHook(s *server, name string, flags ...string) {
	h.t.Helper()
	f := filepath.Join(h.t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(h.secret+"\n"), 0o600); err != nil {
		h.t.Fatal(err)
	}
	s.ok("alice", append([]string{"notifications", "add", name, "--url", h.url(), "--secret-file", f}, flags...)...)
}

// notifyingEvents are the events of app/svc that notify, by seq.
func notifyingEvents(s *server, app, svc string) map[string]apiv1.Event {
	out := map[string]apiv1.Event{}
	for _, e := range s.events(app, svc) {
		switch e.Type {
		case "converged", "approval-requested", "blocked", "failed":
			out[strconv.FormatInt(e.Seq, 10)] = e
		}
	}
	return out
}

// TestNotifyWebhook: a webhook receives signed CloudEvents (CDEvents types
// for deployments) in order, an approval request within a second with what
// it would roll out; while the receiver is down for a minute deliveries
// fail and are listed, and once it is back the backlog arrives with the
// same ids.
func TestNotifyWebhook(t *testing.T) {
	requireE2E(t)
	h := newHookReceiver(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t, "--notify-max-backoff", "3s", "--external-url", "https://drover.example.com")
	h.addHook(s, "ci")
	// A second target sees only prod's approval requests.
	s.ok("alice", "notifications", "add", "approvals", "--url", "http://127.0.0.1:1/", "--secret-file", writeSecret(t), "--events", "approval.requested", "--release-channel", "prod")
	list := s.ok("alice", "notifications", "-o", "json")
	if !strings.Contains(list.stdout, `"url": "http://`+h.addr+`/hooks/drover?…"`) || strings.Contains(list.stdout, h.secret) || strings.Contains(list.stdout, "not-shown") {
		t.Errorf("notifications list shows the secret or the URL's query, or not the URL:\n%s", list.stdout)
	}
	s.ok("alice", "apply", dir+"/...")
	v1, ds1 := s.push("alice", "shop", "web", "image=1.0")

	deployed := h.waitFor(30*time.Second, "staging deployed", is("service.deployed", "staging"))
	if deployed.Type != "dev.cdevents.service.deployed.0.2.0" || deployed.Subject != "shop/web/staging" ||
		deployed.Source != "https://drover.example.com/apps/shop/services/web" || deployed.Payload.Version != v1 ||
		deployed.Payload.DesiredStateID != ds1 || deployed.Payload.PushedBy != "alice" ||
		deployed.Payload.Link != "https://drover.example.com/#/apps/shop/services/web" {
		t.Errorf("deployed event: %+v", deployed)
	}
	asked := h.waitFor(30*time.Second, "prod's approval request", is("approval.requested", "prod"))
	if asked.Type != "dev.drover.approval.requested.0.1.0" || !strings.Contains(asked.Payload.Preview, v1) || !strings.Contains(asked.Payload.Preview, "(now nothing yet)") ||
		asked.Payload.ApproveCommand != "drover approve web --app shop --release-channel prod" {
		t.Errorf("approval request: %+v", asked)
	}
	latency := asked.At.Sub(asked.Payload.Time)
	t.Logf("approval requested -> webhook delivered: %s", latency)

	// The receiver is down for a minute: prod is approved and converges,
	// the deliveries fail and wait.
	h.stop()
	s.ok("bob", "approve", "web", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "web", 30*time.Second, "prod converged", channelIs("prod", "CONVERGED", v1))
	deadline := time.Now().Add(30 * time.Second)
	for {
		failed := s.ok("alice", "notifications", "--failed")
		if strings.Contains(failed.stdout, "service.deployed") && strings.Contains(failed.stdout, "connection refused") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drover notifications --failed does not list prod's failed delivery:\n%s", failed.stdout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Minute - 30*time.Second + time.Until(deadline))
	before := len(h.events())
	h.start()
	back := h.waitFor(30*time.Second, "prod deployed after the receiver came back", is("service.deployed", "prod"))
	if back.Attempt == "1" {
		t.Errorf("prod's deployment came at the first attempt, want a retry: %+v", back)
	}
	if len(h.events()) <= before {
		t.Fatal("nothing arrived after the receiver came back")
	}

	// Every notifying event arrived, once per id, in the order of the
	// events (one service), with the event's seq as its id.
	time.Sleep(2 * time.Second)
	evs := notifyingEvents(s, "shop", "web")
	got := map[string]int{}
	var order []int64
	for _, e := range h.events() {
		got[e.ID]++
		n, err := strconv.ParseInt(e.ID, 10, 64)
		if err != nil {
			t.Errorf("id %q is not the event's seq", e.ID)
		}
		order = append(order, n)
		ev, ok := evs[e.ID]
		if !ok || ev.ReleaseChannel != e.Payload.ReleaseChannel || ev.Message != e.Payload.Message {
			t.Errorf("delivered id %s is not the event %+v", e.ID, ev)
		}
	}
	for id, ev := range evs {
		if got[id] == 0 {
			t.Errorf("event %s (%s %s) was not delivered", id, ev.Type, ev.ReleaseChannel)
		}
	}
	if !sort.SliceIsSorted(order, func(i, j int) bool { return order[i] < order[j] }) {
		t.Errorf("deliveries out of the events' order: %v", order)
	}
	h.checkClean()

	// The other target: only prod's approval request, dead-ended on a
	// closed port; metrics count both.
	d := s.ok("alice", "notifications", "deliveries", "--target", "approvals", "-o", "json")
	var dl apiv1.DeliveryList
	if err := json.Unmarshal([]byte(d.stdout), &dl); err != nil {
		t.Fatal(err)
	}
	if len(dl.Deliveries) != 1 || dl.Deliveries[0].Type != "approval.requested" || dl.Deliveries[0].ReleaseChannel != "prod" || dl.Deliveries[0].LastError == "" {
		t.Errorf("approvals target's deliveries: %s", d.stdout)
	}
	var metrics string
	resp, err := s.httpClient().Do(mustRequest(t, s, "/metrics"))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		metrics = string(b)
	}
	for _, want := range []string{`drover_notifications_delivered_total{target="ci",type="service.deployed"}`, `drover_notification_deliveries{state="pending",target="approvals"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	s.ok("alice", "notifications", "remove", "approvals")
	if r := s.as("alice", "notifications", "remove", "approvals"); r.code == 0 || !strings.Contains(r.stderr, "no notification target approvals") {
		t.Errorf("removing again: %v", r)
	}
}

func writeSecret(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("another-secret-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func mustRequest(t *testing.T, s *server, path string) *http.Request {
	req, err := newAPIRequest(http.MethodGet, s.url+path, s.token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestNotifyBadInput: a webhook with a short secret, a URL that is not
// http(s), an unknown event type or status is refused, naming the field,
// and nothing is stored.
func TestNotifyBadInput(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := writeSecret(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "x", "--url", "http://127.0.0.1:9/", "--secret-file", short}, "secret: at least 16 bytes"},
		{[]string{"add", "x", "--url", "ftp://example.com/", "--secret-file", good}, "url: give an http:// or https:// URL"},
		{[]string{"add", "x", "--url", "http://127.0.0.1:9/"}, "secret: at least 16 bytes"},
		{[]string{"add", "x", "--url", "http://127.0.0.1:9/", "--secret-file", good, "--events", "service.exploded"}, `"service.exploded" is not a notification type`},
		{[]string{"add", "x", "--url", "http://127.0.0.1:9/", "--secret-file", good, "--status", "HAPPY"}, `"HAPPY" is not a status`},
		{[]string{"add", "Bad Name", "--url", "http://127.0.0.1:9/", "--secret-file", good}, "use 1 to 127 lowercase letters"},
		{[]string{"add", "x", "--url", "http://u:p@127.0.0.1:9/", "--secret-file", good}, "credentials in the URL are refused"},
		{[]string{"retry", "abc"}, `delivery id "abc"`},
	} {
		r := s.as("alice", append([]string{"notifications"}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("notifications %s: exit %d, stderr %q; want an error with %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	list := s.ok("alice", "notifications")
	if !strings.Contains(list.stdout, "no notification targets") {
		t.Errorf("a refused target was stored:\n%s", list.stdout)
	}
}

// TestNotifySIGKILL: the server is killed with SIGKILL while a delivery is
// in flight (the receiver holds the request); after a restart the delivery
// is made again with the same id, and no notification is lost.
func TestNotifySIGKILL(t *testing.T) {
	requireE2E(t)
	h := newHookReceiver(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t, "--notify-max-backoff", "2s")
	h.addHook(s, "ci")
	held := make(chan hookEvent, 1)
	h.mu.Lock()
	h.hold = func(e hookEvent) time.Duration {
		if e.Payload.Type == "approval.requested" && e.Attempt == "1" {
			held <- e
			return 3 * time.Second // the server dies meanwhile; the answer goes nowhere
		}
		return 0
	}
	h.mu.Unlock()
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", "shop", "web", "image=1.0")
	var first hookEvent
	select {
	case first = <-held:
	case <-time.After(60 * time.Second):
		t.Fatalf("the approval request never reached the receiver: %s", h.summary())
	}
	s.kill()
	s.start()
	again := h.waitFor(90*time.Second, "the approval request again", func(e hookEvent) bool {
		return e.Payload.Type == "approval.requested" && e.Attempt != "1"
	})
	if again.ID != first.ID || again.Delivery != first.Delivery {
		t.Errorf("redelivery %s (delivery %s), want the same id %s (delivery %s)", again.ID, again.Delivery, first.ID, first.Delivery)
	}
	s.ok("bob", "approve", "web", "--app", "shop", "--release-channel", "prod")
	h.waitFor(60*time.Second, "prod deployed", is("service.deployed", "prod"))
	time.Sleep(time.Second)
	got := map[string]bool{}
	for _, e := range h.events() {
		got[e.ID] = true
	}
	for id, ev := range notifyingEvents(s, "shop", "web") {
		if !got[id] {
			t.Errorf("event %s (%s %s) was lost", id, ev.Type, ev.ReleaseChannel)
		}
	}
	h.checkClean()
}

// TestNotifyTwoServers: two servers on one PostgreSQL database deliver
// each event once in the steady state, whichever server wrote it.
func TestNotifyTwoServers(t *testing.T) {
	requireE2E(t)
	url := pgtest.NewDatabase(t)
	h := newHookReceiver(t)
	flags := []string{"--database", url, "--secrets-key-file", sharedKeyring(t), "--poll-interval", "100ms", "--lease-ttl", "2s"}
	rs := []*server{newServer(t, flags...), newServer(t, flags...)}
	h.addHook(rs[0], "ci")
	for i, app := range []string{"shop", "blog", "docs"} {
		dir := twoChannelTree(t, app, "500ms")
		s := rs[i%2]
		s.ok("alice", "apply", dir+"/...")
		s.push("alice", app, "web", "image=1.0")
		s.waitStatus(app, "web", 60*time.Second, "prod waiting", prodWaitsForApproval)
		rs[(i+1)%2].ok("bob", "approve", "web", "--app", app, "--release-channel", "prod")
	}
	for _, app := range []string{"shop", "blog", "docs"} {
		h.waitFor(60*time.Second, app+" prod deployed", func(e hookEvent) bool {
			return e.Payload.Application == app && e.Payload.Type == "service.deployed" && e.Payload.ReleaseChannel == "prod"
		})
	}
	time.Sleep(3 * time.Second)
	count := map[string]int{}
	for _, e := range h.events() {
		count[e.ID]++
	}
	want := 0
	for _, app := range []string{"shop", "blog", "docs"} {
		for id, ev := range notifyingEvents(rs[0], app, "web") {
			want++
			if count[id] != 1 {
				t.Errorf("event %s (%s %s %s) delivered %d times, want once", id, app, ev.Type, ev.ReleaseChannel, count[id])
			}
		}
	}
	if len(count) != want {
		t.Errorf("%d distinct events delivered, want %d: %s", len(count), want, h.summary())
	}
	h.checkClean()
}

// TestNotifyWebhookConfig: a webhook is also a config kind (webhook:),
// applied with the rest: its secret comes from drover's secret store, a
// missing one is refused naming the file, line and field, and nothing is
// stored; once applied, it receives the events like one the CLI added.
func TestNotifyWebhookConfig(t *testing.T) {
	requireE2E(t)
	h := newHookReceiver(t)
	dir := twoChannelTree(t, "shop", "1s")
	hook := filepath.Join(dir, "ci.pvn.yaml")
	if err := os.WriteFile(hook, []byte("webhook:\n  name: ci\n  url: "+h.url()+"\n  secret: {key: ci-hook, version: ci-hook-0}\n  events: [service.deployed, approval.requested]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	r := s.as("alice", "apply", dir+"/...")
	if r.code == 0 || !strings.Contains(r.stderr, "ci.pvn.yaml:4") || !strings.Contains(r.stderr, "webhook.secret") || !strings.Contains(r.stderr, "ci-hook") {
		t.Fatalf("apply with the secret missing: %v", r)
	}
	if list := s.ok("alice", "notifications"); !strings.Contains(list.stdout, "no notification targets") {
		t.Errorf("a refused apply stored a target:\n%s", list.stdout)
	}
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(h.secret), 0o600); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "secrets", "set", "ci-hook", "--from-file", f)
	s.ok("alice", "apply", dir+"/...")
	list := s.ok("alice", "notifications")
	if !strings.Contains(list.stdout, "ci ") || !strings.Contains(list.stdout, "config") || !strings.Contains(list.stdout, "service.deployed,approval.requested") {
		t.Errorf("the webhook config's target:\n%s", list.stdout)
	}
	if r := s.as("alice", "notifications", "remove", "ci"); r.code == 0 || !strings.Contains(r.stderr, "managed by drover apply") {
		t.Errorf("removing a config's webhook through the CLI: %v", r)
	}
	s.push("alice", "shop", "web", "image=1.0")
	h.waitFor(30*time.Second, "staging deployed", is("service.deployed", "staging"))
	h.waitFor(30*time.Second, "prod's approval request", is("approval.requested", "prod"))
	for _, e := range h.events() {
		if e.Payload.Type != "service.deployed" && e.Payload.Type != "approval.requested" {
			t.Errorf("the filter let through %s", e.Payload.Type)
		}
	}
	h.checkClean()
}
