package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// fakeSlack answers the part of Slack's Web API drover calls
// (chat.postMessage, as api.slack.com/methods/chat.postMessage documents
// it: a form with token, channel, text and blocks; {"ok":true,...}) and
// takes the posts to interactions' response_url (/hooks/...). There is no
// Slack emulator; this one is on loopback.
type fakeSlack struct {
	t     *testing.T
	token string
	url   string

	mu      sync.Mutex
	posts   []slackPost
	replies []map[string]any
}

type slackPost struct {
	Channel, Text string
	Blocks        []map[string]any
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{t: t, token: "xoxb-e2e-bot-token"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.url = "http://" + ln.Addr().String()
	return f
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/chat.postMessage":
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tok := r.Form.Get("token")
		if h := r.Header.Get("Authorization"); tok == "" && strings.HasPrefix(h, "Bearer ") {
			tok = strings.TrimPrefix(h, "Bearer ")
		}
		if tok != f.token {
			_, _ = io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
			return
		}
		p := slackPost{Channel: r.Form.Get("channel"), Text: r.Form.Get("text")}
		if b := r.Form.Get("blocks"); b != "" {
			if err := json.Unmarshal([]byte(b), &p.Blocks); err != nil {
				_, _ = io.WriteString(w, `{"ok":false,"error":"invalid_blocks"}`)
				return
			}
		}
		f.mu.Lock()
		f.posts = append(f.posts, p)
		n := len(f.posts)
		f.mu.Unlock()
		_, _ = fmt.Fprintf(w, `{"ok":true,"channel":"C0DEPLOYS","ts":"1700000000.%06d","message":{"text":%q}}`, n, p.Text)
	case strings.HasPrefix(r.URL.Path, "/hooks/"):
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.replies = append(f.replies, m)
		f.mu.Unlock()
		_, _ = io.WriteString(w, `{"ok":true}`)
	default:
		_, _ = io.WriteString(w, `{"ok":false,"error":"unknown_method"}`)
	}
}

// waitPost waits for a message cond accepts.
func (f *fakeSlack) waitPost(timeout time.Duration, what string, cond func(slackPost) bool) slackPost {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		posts := slices.Clone(f.posts)
		f.mu.Unlock()
		for _, p := range posts {
			if cond(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			var got []string
			for _, p := range posts {
				got = append(got, p.Channel+": "+p.Text)
			}
			f.t.Fatalf("slack: no %s within %s; got %q", what, timeout, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReply waits for the n-th post to a response_url (from 1).
func (f *fakeSlack) waitReply(n int) map[string]any {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		f.mu.Lock()
		if len(f.replies) >= n {
			r := f.replies[n-1]
			f.mu.Unlock()
			return r
		}
		f.mu.Unlock()
		if time.Now().After(deadline) {
			f.t.Fatalf("slack: no reply %d to a response_url", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buttonValue is the value of the button actionID in p.
func buttonValue(p slackPost, actionID string) string {
	for _, b := range p.Blocks {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			if m, ok := e.(map[string]any); ok && m["action_id"] == actionID {
				v, _ := m["value"].(string)
				return v
			}
		}
	}
	return ""
}

// click posts a block_actions payload of user pressing actionID, signed
// with secret at ts, to the server, and returns the status.
func click(t *testing.T, s *server, secret string, ts time.Time, user, actionID, value string, post slackPost, replyTo string) int {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"type": "block_actions", "team": map[string]any{"id": "T0SHOP"}, "user": map[string]any{"id": user, "team_id": "T0SHOP"},
		"api_app_id": "A0DROVER", "container": map[string]any{"type": "message", "message_ts": "1700000000.000001", "channel_id": "C0DEPLOYS"},
		"channel":      map[string]any{"id": "C0DEPLOYS", "name": "deploys"},
		"message":      map[string]any{"type": "message", "ts": "1700000000.000001", "text": post.Text, "blocks": post.Blocks},
		"response_url": replyTo, "trigger_id": "1.2.3",
		"actions": []map[string]any{{"action_id": actionID, "block_id": "drover_actions", "type": "button", "value": value,
			"action_ts": strconv.FormatInt(time.Now().UnixNano(), 10)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := url.Values{"payload": {string(payload)}}.Encode()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + stamp + ":" + body))
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/slack/interactions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := s.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestNotifySlack: an application's notifications.slack posts its
// deployments and approval requests to its channel; prod's request has the
// preview and Approve / Reject buttons. Clicks signed with the Slack app's
// signing secret approve as the drover identity the users file maps the
// Slack user to: a bad signature, an old (replayed) timestamp and an
// unmapped user are refused and record nothing, the same person twice
// counts once, and the second approver's click ends the wait.
func TestNotifySlack(t *testing.T) {
	requireE2E(t)
	sl := newFakeSlack(t)
	tmp := t.TempDir()
	users := filepath.Join(tmp, "slack-users.yaml")
	if err := os.WriteFile(users, []byte(`users:
  - {slack: U0ALICE, team: T0SHOP, identity: alice, roles: [approver@shop]}
  - {slack: U0BOB, identity: bob, roles: [approver@shop/prod]}
  - {slack: U0VIEW, identity: victor, roles: [viewer@shop]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := quorumTree(t, "shop")
	app := filepath.Join(dir, "app.pvn.yaml")
	raw, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.Replace(string(raw), "  name: shop\n", "  name: shop\n  notifications:\n    slack:\n      channel: \"#deploys\"\n      errorChannel: \"#deploys-errors\"\n", 1))
	if err := os.WriteFile(app, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, "--slack-api-url", sl.url+"/api/", "--slack-users", users)
	const signing = "e2e-slack-signing-secret"
	for key, val := range map[string]string{"slack-bot-token": sl.token, "slack-signing-secret": signing} {
		f := filepath.Join(tmp, key)
		if err := os.WriteFile(f, []byte(val), 0o600); err != nil {
			t.Fatal(err)
		}
		s.ok("alice", "secrets", "set", key, "--from-file", f)
	}
	s.ok("alice", "apply", dir+"/...")
	list := s.ok("alice", "notifications")
	if !strings.Contains(list.stdout, "slack.shop ") || !strings.Contains(list.stdout, "#deploys") || !strings.Contains(list.stdout, "slack.shop.errors") {
		t.Errorf("notifications list lacks the application's Slack targets:\n%s", list.stdout)
	}
	if r := s.as("alice", "notifications", "remove", "slack.shop"); r.code == 0 || !strings.Contains(r.stderr, "notifications.slack") {
		t.Errorf("removing a config's target: %v", r)
	}
	v1, ds1 := s.push("alice", "shop", "web", "image=1.0")
	sl.waitPost(30*time.Second, "staging's deployment", func(p slackPost) bool {
		return p.Channel == "#deploys" && strings.Contains(p.Text, "staging") && strings.Contains(p.Text, "deployed")
	})
	asked := sl.waitPost(30*time.Second, "prod's approval request", func(p slackPost) bool {
		return p.Channel == "#deploys" && buttonValue(p, "drover_approve") != ""
	})
	blocks, _ := json.Marshal(asked.Blocks)
	if !strings.Contains(string(blocks), v1) || !strings.Contains(string(blocks), "drover_reject") {
		t.Errorf("approval request lacks the version or the Reject button: %s", blocks)
	}
	value := buttonValue(asked, "drover_approve")
	if !strings.Contains(value, ds1) {
		t.Errorf("the Approve button's value %q does not name desired state %s", value, ds1)
	}
	hook := sl.url + "/hooks/T0SHOP/1"
	now := time.Now()

	// Refused, and nothing recorded: a bad signature, a replayed old
	// request, an unmapped user, a user without the approve role.
	if code := click(t, s, "not-the-secret", now, "U0ALICE", "drover_approve", value, asked, hook); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", code)
	}
	if code := click(t, s, signing, now.Add(-6*time.Minute), "U0ALICE", "drover_approve", value, asked, hook); code != http.StatusUnauthorized {
		t.Errorf("six-minute-old timestamp: %d, want 401", code)
	}
	if code := click(t, s, signing, now, "U0EVE", "drover_approve", value, asked, hook); code != http.StatusOK {
		t.Errorf("unmapped user: %d, want 200 and an ephemeral reply", code)
	}
	r := sl.waitReply(1)
	if r["response_type"] != "ephemeral" || !strings.Contains(fmt.Sprint(r["text"]), "--slack-users") {
		t.Errorf("reply to an unmapped user: %v", r)
	}
	if code := click(t, s, signing, now, "U0VIEW", "drover_approve", value, asked, hook); code != http.StatusOK {
		t.Errorf("viewer: %d", code)
	}
	if r := sl.waitReply(2); r["response_type"] != "ephemeral" || !strings.Contains(fmt.Sprint(r["text"]), "approve") {
		t.Errorf("reply to a viewer: %v", r)
	}
	if st := s.status("shop", "web"); len(approvedBy(channel(t, st, "prod"))) != 0 {
		t.Fatalf("a refused click approved: %v", approvedBy(channel(t, st, "prod")))
	}

	// alice approves (1 of 2); again: refused; bob's makes 2 of 2.
	if code := click(t, s, signing, now, "U0ALICE", "drover_approve", value, asked, hook); code != http.StatusOK {
		t.Fatalf("alice's click: %d", code)
	}
	r = sl.waitReply(3)
	if r["replace_original"] != true || !strings.Contains(fmt.Sprint(r), "approved by alice (1 of 2)") {
		t.Errorf("the message after alice's approval: %v", r)
	}
	if code := click(t, s, signing, time.Now(), "U0ALICE", "drover_approve", value, asked, hook); code != http.StatusOK {
		t.Fatalf("alice's second click: %d", code)
	}
	if r := sl.waitReply(4); r["response_type"] != "ephemeral" || !strings.Contains(fmt.Sprint(r["text"]), "already") {
		t.Errorf("alice's second click: %v", r)
	}
	if code := click(t, s, signing, time.Now(), "U0BOB", "drover_approve", value, asked, hook); code != http.StatusOK {
		t.Fatalf("bob's click: %d", code)
	}
	r = sl.waitReply(5)
	if r["replace_original"] != true || !strings.Contains(fmt.Sprint(r), "2 of 2") || strings.Contains(fmt.Sprint(r), "drover_approve") {
		t.Errorf("the message after bob's approval (final, no buttons): %v", r)
	}
	st := s.waitStatus("shop", "web", 30*time.Second, "prod converged", channelIs("prod", "CONVERGED", v1))
	if got := approvedBy(channel(t, st, "prod")); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("prod approved by %v, want alice and bob", got)
	}
	var audit apiv1.AuditList
	if err := s.getJSON("/v1/audit?app=shop", &audit); err != nil {
		t.Fatal(err)
	}
	slackRecords := 0
	for _, a := range audit.Records {
		if a.Action == "POST /v1/slack/interactions" && a.IdentityKind == "slack" {
			slackRecords++
		}
	}
	if slackRecords < 3 {
		t.Errorf("audit log holds %d Slack decisions, want alice's two, bob's and the viewer's", slackRecords)
	}
	// The bot token is nowhere in the server's answers or log.
	out := s.ok("alice", "notifications", "-o", "json")
	if strings.Contains(out.stdout, sl.token) || strings.Contains(s.logTail(1000), sl.token) {
		t.Error("the Slack bot token shows in an answer or the log")
	}
}
