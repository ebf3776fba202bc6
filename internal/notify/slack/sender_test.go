package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	goslack "github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"

	"github.com/drover-dev/drover/internal/notify"
	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
)

const testToken = "xoxb-1234-5678-secrettokenvalue"

// posted is a chat.postMessage call the test server saw.
type posted struct {
	Token   string
	Channel string
	Text    string
	Blocks  goslack.Blocks
}

// slackAPI is slack-go's test server (slacktest) with chat.postMessage
// replaced by a recorder: slacktest's own handler hands the message to an
// RTM websocket client only (nothing an HTTP test can read; without a
// client it blocks a goroutine per message) and always answers ok, so it
// can neither show what was posted nor fail the way Slack does. The
// recorder emulates the Web API endpoint: a form-encoded POST with the
// token in the form, answered 200 {"ok":true,...} or 200
// {"ok":false,"error":...}, and 429 with Retry-After when rate limited.
type slackAPI struct {
	srv   *slacktest.Server
	mu    sync.Mutex
	posts []posted
}

func newSlackAPI(t *testing.T) *slackAPI {
	t.Helper()
	api := &slackAPI{}
	api.srv = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", api.postMessage)
	})
	api.srv.Start()
	t.Cleanup(api.srv.Stop)
	return api
}

func (api *slackAPI) postMessage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := posted{Token: r.PostForm.Get("token"), Channel: r.PostForm.Get("channel"), Text: r.PostForm.Get("text")}
	if b := r.PostForm.Get("blocks"); b != "" {
		if err := json.Unmarshal([]byte(b), &p.Blocks); err != nil {
			_, _ = w.Write([]byte(`{"ok":false,"error":"invalid_blocks"}`))
			return
		}
	}
	api.mu.Lock()
	api.posts = append(api.posts, p)
	api.mu.Unlock()
	fail := func(code string) {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": code})
	}
	switch {
	case p.Token == "":
		fail("not_authed")
	case p.Token != testToken:
		fail("invalid_auth")
	case p.Channel == "#nowhere":
		fail("channel_not_found")
	case p.Channel == "#busy":
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		fail("ratelimited")
	case p.Channel == "#flaky":
		fail("internal_error")
	case p.Channel == "#echo":
		fail("weird " + p.Token) // a server that echoes what it was sent
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C0123ABC", "ts": "1700000000.000100",
			"message": map[string]any{"type": "message", "text": p.Text}})
	}
}

func (api *slackAPI) got() []posted {
	api.mu.Lock()
	defer api.mu.Unlock()
	return append([]posted(nil), api.posts...)
}

func newTestSender(t *testing.T, api *slackAPI, token string) *Sender {
	t.Helper()
	s, err := NewSender(SenderConfig{
		Token:  func(context.Context) (string, error) { return token, nil },
		APIURL: api.srv.GetAPIURL(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func target(t *testing.T, spec Spec) store.NotifyTarget {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return store.NotifyTarget{Name: "shop-slack", Kind: store.NotifySlack, Spec: b}
}

func notification(typ string) notify.Notification {
	return notify.Notification{
		Type: typ, Delivery: 7, Attempt: 1,
		Event: store.Event{Application: "shop", Service: "web", ReleaseChannel: "prod", DesiredStateID: "ds-42",
			Actor: "engine", Message: "rolled out <everywhere> & fine", Seq: 99, Time: time.Unix(1700000000, 0)},
		Details: notify.Details{Version: "v2", PushedBy: "alice", Preview: "web: image v1 -> v2\nreplicas 3",
			ApproveCommand: "drover approve shop/web prod"},
		Link: "https://drover.example/#/apps/shop/services/web",
	}
}

func TestSendDeployed(t *testing.T) {
	api := newSlackAPI(t)
	s := newTestSender(t, api, testToken)
	if err := s.Send(context.Background(), target(t, Spec{Channel: "#deploys", ErrorChannel: "#deploys-errors"}), notification(state.NotifyServiceDeployed)); err != nil {
		t.Fatal(err)
	}
	got := api.got()
	if len(got) != 1 {
		t.Fatalf("%d messages posted, want 1", len(got))
	}
	p := got[0]
	if p.Channel != "#deploys" || p.Token != testToken {
		t.Errorf("posted to %q with token %q, want #deploys with the bot token", p.Channel, p.Token)
	}
	if !strings.Contains(p.Text, ":rocket: shop/web deployed v2 to prod") || !strings.Contains(p.Text, "&lt;everywhere&gt; &amp; fine") {
		t.Errorf("text %q", p.Text)
	}
	all := blockText(p.Blocks)
	for _, want := range []string{"shop/web deployed v2 to prod", "*Version:* v2", "*Pushed by:* alice", "<https://drover.example/#/apps/shop/services/web|Open in drover>"} {
		if !strings.Contains(all, want) {
			t.Errorf("blocks lack %q:\n%s", want, all)
		}
	}
	if findActions(p.Blocks) != nil {
		t.Error("a deployment has buttons")
	}
}

func TestSendErrorChannel(t *testing.T) {
	api := newSlackAPI(t)
	s := newTestSender(t, api, testToken)
	both := target(t, Spec{Channel: "#deploys", ErrorChannel: "#deploys-errors"})
	only := target(t, Spec{Channel: "C0123ABC"})
	for _, c := range []struct {
		t    store.NotifyTarget
		typ  string
		want string
	}{
		{both, state.NotifyChannelFailed, "#deploys-errors"},
		{both, state.NotifyChannelBlocked, "#deploys-errors"},
		{both, state.NotifyServiceRolledBack, "#deploys"},
		{both, state.NotifyApprovalRequested, "#deploys"},
		{only, state.NotifyChannelFailed, "C0123ABC"},
	} {
		before := len(api.got())
		if err := s.Send(context.Background(), c.t, notification(c.typ)); err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		got := api.got()
		if len(got) != before+1 || got[before].Channel != c.want {
			t.Errorf("%s: posted %+v, want one message to %s", c.typ, got[before:], c.want)
		}
	}
}

func TestSendApprovalButtons(t *testing.T) {
	api := newSlackAPI(t)
	s := newTestSender(t, api, testToken)
	if err := s.Send(context.Background(), target(t, Spec{Channel: "deploys"}), notification(state.NotifyApprovalRequested)); err != nil {
		t.Fatal(err)
	}
	got := api.got()
	if len(got) != 1 {
		t.Fatalf("%d messages", len(got))
	}
	all := blockText(got[0].Blocks)
	if !strings.Contains(all, "web: image v1 -&gt; v2\nreplicas 3") || !strings.Contains(all, "waits for approval") {
		t.Errorf("no preview or headline in:\n%s", all)
	}
	ab := findActions(got[0].Blocks)
	if ab == nil {
		t.Fatal("no actions block")
	}
	want := Approval{Application: "shop", Service: "web", ReleaseChannel: "prod", DesiredStateID: "ds-42"}
	styles := map[string]goslack.Style{ActionApprove: goslack.StylePrimary, ActionReject: goslack.StyleDanger}
	labels := map[string]string{ActionApprove: "Approve", ActionReject: "Reject"}
	if len(ab.Elements.ElementSet) != 2 {
		t.Fatalf("%d buttons, want 2", len(ab.Elements.ElementSet))
	}
	for _, e := range ab.Elements.ElementSet {
		b, ok := e.(*goslack.ButtonBlockElement)
		if !ok {
			t.Fatalf("element %T, want a button", e)
		}
		if b.Style != styles[b.ActionID] || b.Text == nil || b.Text.Text != labels[b.ActionID] {
			t.Errorf("button %s: style %q text %+v", b.ActionID, b.Style, b.Text)
		}
		a, err := DecodeApproval(b.Value)
		if err != nil || a != want {
			t.Errorf("button %s value %q: %+v, %v", b.ActionID, b.Value, a, err)
		}
	}
}

func TestSendErrors(t *testing.T) {
	api := newSlackAPI(t)
	s := newTestSender(t, api, testToken)
	ctx := context.Background()
	n := notification(state.NotifyServiceDeployed)

	err := s.Send(ctx, target(t, Spec{Channel: "#nowhere"}), n)
	var perm *notify.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "channel_not_found") {
		t.Errorf("channel_not_found: %v (%T), want a permanent error", err, err)
	}

	err = s.Send(ctx, target(t, Spec{Channel: "#busy"}), n)
	var ra *notify.RetryAfterError
	if !errors.As(err, &ra) || ra.After != 7*time.Second {
		t.Errorf("rate limited: %v (%T), want retry after 7s", err, err)
	}

	err = s.Send(ctx, target(t, Spec{Channel: "#flaky"}), n)
	if err == nil || errors.As(err, &perm) || errors.As(err, &ra) {
		t.Errorf("internal_error: %v (%T), want a plain (retried) error", err, err)
	}

	err = s.Send(ctx, target(t, Spec{Channel: "#echo"}), n)
	if err == nil || strings.Contains(err.Error(), testToken) {
		t.Errorf("echoed token: %v, want an error without the token", err)
	}

	err = newTestSender(t, api, "xoxb-wrong").Send(ctx, target(t, Spec{Channel: "#deploys"}), n)
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "invalid_auth") || strings.Contains(err.Error(), "xoxb-wrong") {
		t.Errorf("invalid_auth: %v (%T), want a permanent error without the token", err, err)
	}

	before := len(api.got())
	err = newTestSender(t, api, "").Send(ctx, target(t, Spec{Channel: "#deploys"}), n)
	if !errors.As(err, &perm) || len(api.got()) != before {
		t.Errorf("no token: %v (%T), want a permanent error and nothing posted", err, err)
	}

	tokenErr := errors.New("secret store down")
	s2, _ := NewSender(SenderConfig{Token: func(context.Context) (string, error) { return "", tokenErr }, APIURL: api.srv.GetAPIURL()})
	err = s2.Send(ctx, target(t, Spec{Channel: "#deploys"}), n)
	if !errors.Is(err, tokenErr) || errors.As(err, &perm) {
		t.Errorf("token unavailable: %v, want a retried error wrapping it", err)
	}

	bad := store.NotifyTarget{Name: "x", Kind: store.NotifySlack, Spec: []byte(`{"channel":"Not A Channel"}`)}
	if err := s.Send(ctx, bad, n); !errors.As(err, &perm) {
		t.Errorf("bad spec: %v, want a permanent error", err)
	}
}

func TestCheckSpec(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		ok   bool
	}{
		{Spec{Channel: "#deploys"}, true},
		{Spec{Channel: "deploys", ErrorChannel: "#deploys-errors"}, true},
		{Spec{Channel: "C0123ABC"}, true},
		{Spec{Channel: "G0123ABCDE"}, true},
		{Spec{Channel: "team_shop.prod"}, true},
		{Spec{}, false},
		{Spec{Channel: "#"}, false},
		{Spec{Channel: "#Deploys"}, false},
		{Spec{Channel: "dep loys"}, false},
		{Spec{Channel: "#" + strings.Repeat("a", 81)}, false},
		{Spec{Channel: "#deploys", ErrorChannel: "#bad channel"}, false},
	} {
		err := CheckSpec(c.spec)
		if (err == nil) != c.ok {
			t.Errorf("CheckSpec(%+v) = %v, want ok %v", c.spec, err, c.ok)
		}
	}
	if _, err := ParseSpec([]byte(`{"channel":"#a","chanel":"#b"}`)); err == nil {
		t.Error("ParseSpec took an unknown field")
	}
	if s, err := ParseSpec([]byte(`{"channel":"#a","errorChannel":"#b"}`)); err != nil || s != (Spec{"#a", "#b"}) {
		t.Errorf("ParseSpec: %+v, %v", s, err)
	}
}

func TestApprovalValue(t *testing.T) {
	a := Approval{Application: "shop", Service: "web", ReleaseChannel: "prod", DesiredStateID: "ds-42"}
	v, err := EncodeApproval(a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeApproval(v); err != nil || got != a {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	if _, err := EncodeApproval(Approval{Application: "shop"}); err == nil || !strings.Contains(err.Error(), "service") {
		t.Errorf("incomplete approval encoded: %v", err)
	}
	for _, v := range []string{"", "nope", `{"app":"shop"}`, `{"app":"a","svc":"b","ch":"c","ds":"d","x":1}`} {
		if _, err := DecodeApproval(v); err == nil {
			t.Errorf("DecodeApproval(%q) took it", v)
		}
	}
}

// blockText is every text of blocks, one a line.
func blockText(bs goslack.Blocks) string {
	var out []string
	for _, b := range bs.BlockSet {
		switch b := b.(type) {
		case *goslack.SectionBlock:
			if b.Text != nil {
				out = append(out, b.Text.Text)
			}
		case *goslack.ContextBlock:
			for _, e := range b.ContextElements.Elements {
				if t, ok := e.(*goslack.TextBlockObject); ok {
					out = append(out, t.Text)
				}
			}
		}
	}
	return strings.Join(out, "\n")
}

// findActions is the approval buttons' block of bs, or nil.
func findActions(bs goslack.Blocks) *goslack.ActionBlock {
	for _, b := range bs.BlockSet {
		if a, ok := b.(*goslack.ActionBlock); ok && a.BlockID == blockActions {
			return a
		}
	}
	return nil
}

func TestMessageApprovalWithoutState(t *testing.T) {
	n := notification(state.NotifyApprovalRequested)
	n.Event.DesiredStateID = ""
	_, blocks := Message(n)
	if findActions(goslack.Blocks{BlockSet: blocks}) != nil {
		t.Error("buttons without a desired state to approve")
	}
	if all := blockText(goslack.Blocks{BlockSet: blocks}); !strings.Contains(all, "drover approve shop/web prod") {
		t.Errorf("no approve command in:\n%s", all)
	}
}
