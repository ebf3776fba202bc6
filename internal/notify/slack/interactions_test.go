package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goslack "github.com/slack-go/slack"

	"github.com/drover-dev/drover/internal/state"
)

// clicks tells clicks apart (their action_ts), as Slack's differ.
var clicks atomic.Int64

const testSigningSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// reply is a post to the response URL.
type reply struct {
	ResponseType    string          `json:"response_type"`
	ReplaceOriginal bool            `json:"replace_original"`
	Text            string          `json:"text"`
	Blocks          json.RawMessage `json:"blocks"`
}

// approvals is the server's side in the tests: two approvals end the wait,
// a rejection ends it at once, nobody decides twice.
type approvals struct {
	mu      sync.Mutex
	calls   []decideCall
	decided map[string]bool
	fail    error
}

type decideCall struct {
	Identity string
	Decision Decision
}

func (a *approvals) decide(_ context.Context, identity string, d Decision) (Outcome, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, decideCall{identity, d})
	if a.fail != nil {
		return Outcome{}, a.fail
	}
	if a.decided[identity] {
		return Outcome{}, fmt.Errorf("%s already approved %s: %w", identity, d.DesiredStateID, ErrAlreadyDecided)
	}
	a.decided[identity] = true
	if !d.Approve {
		return Outcome{Text: "rejected by " + identity, Final: true}, nil
	}
	n := len(a.decided)
	return Outcome{Text: fmt.Sprintf("approved by %s (%d of 2)", identity, n), Final: n >= 2}, nil
}

func (a *approvals) got() []decideCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]decideCall(nil), a.calls...)
}

type interactionsTest struct {
	h       *Interactions
	dec     *approvals
	replyTo string
	mu      sync.Mutex
	replies []reply
}

func newInteractionsTest(t *testing.T) *interactionsTest {
	t.Helper()
	it := &interactionsTest{dec: &approvals{decided: map[string]bool{}}}
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep reply
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &rep) != nil {
			t.Errorf("response_url got %s %s %q", r.Method, r.Header.Get("Content-Type"), b)
		}
		it.mu.Lock()
		it.replies = append(it.replies, rep)
		it.mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(rs.Close)
	it.replyTo = rs.URL + "/actions/T1/123/abc"
	users := map[string]string{"T1/U1": "alice", "T1/U2": "bob"}
	h, err := NewInteractions(InteractionsConfig{
		SigningSecret: func(context.Context) (string, error) { return testSigningSecret, nil },
		Identity: func(_ context.Context, team, user string) (string, bool) {
			id, ok := users[team+"/"+user]
			return id, ok
		},
		Decide:           it.dec.decide,
		HTTPClient:       rs.Client(),
		AllowResponseURL: func(u *url.URL) bool { return u.Scheme == "http" && u.Host == rs.Listener.Addr().String() },
	})
	if err != nil {
		t.Fatal(err)
	}
	it.h = h
	return it
}

func (it *interactionsTest) got() []reply {
	it.h.Wait()
	it.mu.Lock()
	defer it.mu.Unlock()
	return append([]reply(nil), it.replies...)
}

// payload is a block_actions payload as Slack sends it, of a click by user
// on the button action of the approval request's message.
func (it *interactionsTest) payload(t *testing.T, user, action string) string {
	t.Helper()
	text, blocks := Message(notification(state.NotifyApprovalRequested))
	value := ""
	for _, b := range blocks {
		if ab, ok := b.(*goslack.ActionBlock); ok {
			for _, e := range ab.Elements.ElementSet {
				if btn := e.(*goslack.ButtonBlockElement); btn.ActionID == action {
					value = btn.Value
				}
			}
		}
	}
	p := map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": "someone", "name": "someone", "team_id": "T1"},
		"api_app_id":   "A1",
		"token":        "deprecated-verification-token",
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0123ABC", "is_ephemeral": false},
		"trigger_id":   "123.456.abc",
		"team":         map[string]any{"id": "T1", "domain": "shop"},
		"channel":      map[string]any{"id": "C0123ABC", "name": "deploys"},
		"message":      map[string]any{"type": "message", "ts": "1700000000.000100", "text": text, "blocks": blocks},
		"response_url": it.replyTo,
		"actions": []map[string]any{{
			"action_id": action, "block_id": blockActions, "type": "button", "value": value,
			"text": map[string]any{"type": "plain_text", "text": "Approve"}, "action_ts": fmt.Sprintf("%d.%06d", time.Now().Unix(), clicks.Add(1)),
		}},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return url.Values{"payload": {string(b)}}.Encode()
}

// sign signs body as Slack does: v0= and the hex HMAC-SHA256 of
// "v0:timestamp:body" keyed with the signing secret.
func sign(secret string, ts time.Time, body string) (timestamp, signature string) {
	timestamp = strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + timestamp + ":" + body))
	return timestamp, "v0=" + hex.EncodeToString(mac.Sum(nil))
}

func (it *interactionsTest) post(body, timestamp, signature string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Slack-Request-Timestamp", timestamp)
	r.Header.Set("X-Slack-Signature", signature)
	w := httptest.NewRecorder()
	it.h.ServeHTTP(w, r)
	return w
}

func (it *interactionsTest) click(t *testing.T, user, action string) *httptest.ResponseRecorder {
	t.Helper()
	body := it.payload(t, user, action)
	ts, sig := sign(testSigningSecret, time.Now(), body)
	return it.post(body, ts, sig)
}

// replyBlocks decodes a reply's blocks.
func replyBlocks(t *testing.T, r reply) goslack.Blocks {
	t.Helper()
	var bs goslack.Blocks
	if len(r.Blocks) > 0 {
		if err := json.Unmarshal(r.Blocks, &bs); err != nil {
			t.Fatalf("reply blocks: %v", err)
		}
	}
	return bs
}

func TestInteractionApprove(t *testing.T) {
	it := newInteractionsTest(t)
	if w := it.click(t, "U1", ActionApprove); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	calls := it.dec.got()
	want := Decision{Approve: true, Approval: Approval{Application: "shop", Service: "web", ReleaseChannel: "prod", DesiredStateID: "ds-42"}, SlackTeamID: "T1", SlackUserID: "U1"}
	if len(calls) != 1 || calls[0].Identity != "alice" || calls[0].Decision != want {
		t.Fatalf("Decide calls %+v, want alice deciding %+v", calls, want)
	}
	got := it.got()
	if len(got) != 1 || !got[0].ReplaceOriginal || got[0].ResponseType == "ephemeral" {
		t.Fatalf("replies %+v, want one replacing the message", got)
	}
	bs := replyBlocks(t, got[0])
	if all := blockText(bs); !strings.Contains(all, ":white_check_mark: approved by alice (1 of 2)") || !strings.Contains(all, "waits for approval") {
		t.Errorf("updated message lacks the approver or the original:\n%s", all)
	}
	if findActions(bs) == nil {
		t.Error("buttons removed while the wait needs another approval")
	}

	// The second approval ends the wait: the buttons go, one status line.
	if w := it.click(t, "U2", ActionApprove); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	got = it.got()
	if len(got) != 2 || !got[1].ReplaceOriginal {
		t.Fatalf("replies %+v", got)
	}
	bs = replyBlocks(t, got[1])
	all := blockText(bs)
	if !strings.Contains(all, "approved by bob (2 of 2)") || findActions(bs) != nil {
		t.Errorf("final update: buttons %v, text:\n%s", findActions(bs) != nil, all)
	}
	if strings.Count(all, "approved by") != 1 {
		t.Errorf("status lines: %d, want 1 (the message the test posts is the original)", strings.Count(all, "approved by"))
	}
}

func TestInteractionReject(t *testing.T) {
	it := newInteractionsTest(t)
	if w := it.click(t, "U2", ActionReject); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	calls := it.dec.got()
	if len(calls) != 1 || calls[0].Identity != "bob" || calls[0].Decision.Approve {
		t.Fatalf("Decide calls %+v, want bob rejecting", calls)
	}
	got := it.got()
	if len(got) != 1 || !got[0].ReplaceOriginal {
		t.Fatalf("replies %+v", got)
	}
	bs := replyBlocks(t, got[0])
	if all := blockText(bs); !strings.Contains(all, ":no_entry_sign: rejected by bob") || findActions(bs) != nil {
		t.Errorf("rejection: buttons %v, text:\n%s", findActions(bs) != nil, all)
	}
}

func TestInteractionBadSignature(t *testing.T) {
	it := newInteractionsTest(t)
	body := it.payload(t, "U1", ActionApprove)
	ts, sig := sign("another-secret", time.Now(), body)
	for name, c := range map[string]struct{ ts, sig, body string }{
		"wrong secret":     {ts, sig, body},
		"body changed":     {ts, func() string { _, s := sign(testSigningSecret, time.Now(), body); return s }(), body + "&x=1"},
		"no signature":     {ts, "", body},
		"not hex":          {ts, "v0=zz", body},
		"no v0":            {ts, strings.TrimPrefix(sig, "v0="), body},
		"timestamp edited": {strconv.FormatInt(time.Now().Unix()-1, 10), func() string { _, s := sign(testSigningSecret, time.Now(), body); return s }(), body},
	} {
		if w := it.post(c.body, c.ts, c.sig); w.Code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, w.Code)
		}
	}
	if calls := it.dec.got(); len(calls) != 0 {
		t.Errorf("Decide called %d times", len(calls))
	}
	if got := it.got(); len(got) != 0 {
		t.Errorf("replies %+v", got)
	}
}

func TestInteractionReplay(t *testing.T) {
	it := newInteractionsTest(t)
	body := it.payload(t, "U1", ActionApprove)
	ts, sig := sign(testSigningSecret, time.Now().Add(-6*time.Minute), body) // signed right, too long ago
	if w := it.post(body, ts, sig); w.Code != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", w.Code)
	}
	if calls := it.dec.got(); len(calls) != 0 {
		t.Errorf("Decide called %d times", len(calls))
	}
	if got := it.got(); len(got) != 0 {
		t.Errorf("replies %+v", got)
	}
}

func TestInteractionReplayInWindow(t *testing.T) {
	it := newInteractionsTest(t)
	body := it.payload(t, "U1", ActionApprove)
	ts, sig := sign(testSigningSecret, time.Now(), body)
	if w := it.post(body, ts, sig); w.Code != http.StatusOK {
		t.Fatalf("first: status %d", w.Code)
	}
	if w := it.post(body, ts, sig); w.Code != http.StatusUnauthorized {
		t.Errorf("replay: status %d, want 401", w.Code)
	}
	if calls := it.dec.got(); len(calls) != 1 {
		t.Errorf("Decide called %d times, want 1", len(calls))
	}
	if got := it.got(); len(got) != 1 {
		t.Errorf("replies %+v, want the first's only", got)
	}
}

func TestInteractionUnmapped(t *testing.T) {
	it := newInteractionsTest(t)
	if w := it.click(t, "U9", ActionApprove); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if calls := it.dec.got(); len(calls) != 0 {
		t.Errorf("Decide called for an unmapped user: %+v", calls)
	}
	got := it.got()
	if len(got) != 1 || got[0].ResponseType != "ephemeral" || got[0].ReplaceOriginal ||
		!strings.Contains(got[0].Text, "not mapped to a drover identity") || !strings.Contains(got[0].Text, "U9") || !strings.Contains(got[0].Text, "admin") {
		t.Errorf("replies %+v, want one ephemeral telling how to get mapped", got)
	}
}

func TestInteractionTwice(t *testing.T) {
	it := newInteractionsTest(t)
	it.click(t, "U1", ActionApprove)
	it.got() // the replies of two clicks may come in any order
	if w := it.click(t, "U1", ActionApprove); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if calls := it.dec.got(); len(calls) != 2 {
		t.Fatalf("Decide calls %+v", calls)
	}
	got := it.got()
	if len(got) != 2 || !got[0].ReplaceOriginal {
		t.Fatalf("replies %+v", got)
	}
	if r := got[1]; r.ResponseType != "ephemeral" || r.ReplaceOriginal || len(r.Blocks) != 0 ||
		!strings.Contains(r.Text, "You already approved shop/web in prod (alice already approved ds-42); nothing changed") {
		t.Errorf("second click's reply %+v, want an ephemeral already-decided one", r)
	}
}

func TestInteractionDecideFails(t *testing.T) {
	it := newInteractionsTest(t)
	it.dec.fail = errors.New("shop/web in prod is not waiting for approval")
	it.click(t, "U1", ActionApprove)
	got := it.got()
	if len(got) != 1 || got[0].ResponseType != "ephemeral" || got[0].ReplaceOriginal ||
		!strings.Contains(got[0].Text, "Could not approve shop/web in prod: shop/web in prod is not waiting") {
		t.Errorf("replies %+v", got)
	}
}

func TestInteractionRefusals(t *testing.T) {
	it := newInteractionsTest(t)
	signed := func(body string) *httptest.ResponseRecorder {
		ts, sig := sign(testSigningSecret, time.Now(), body)
		return it.post(body, ts, sig)
	}
	// A response_url that is not allowed is never posted to.
	it.replyTo = "https://evil.example/actions/T1/1/x"
	if w := it.click(t, "U1", ActionApprove); w.Code != http.StatusBadRequest {
		t.Errorf("foreign response_url: status %d, want 400", w.Code)
	}
	// Too big.
	if w := signed("payload=" + strings.Repeat("a", MaxBody)); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("big body: status %d, want 413", w.Code)
	}
	// Not a payload.
	if w := signed("nothing=here"); w.Code != http.StatusBadRequest {
		t.Errorf("no payload: status %d, want 400", w.Code)
	}
	// Another kind of interaction, another button: ignored.
	if w := signed(url.Values{"payload": {`{"type":"view_submission","user":{"id":"U1"}}`}}.Encode()); w.Code != http.StatusOK {
		t.Errorf("view_submission: status %d", w.Code)
	}
	if w := signed(url.Values{"payload": {`{"type":"block_actions","user":{"id":"U1"},"team":{"id":"T1"},"actions":[{"action_id":"open_link"}]}`}}.Encode()); w.Code != http.StatusOK {
		t.Errorf("link button: status %d", w.Code)
	}
	r := httptest.NewRequest(http.MethodGet, "/slack/interactions", nil)
	w := httptest.NewRecorder()
	it.h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d", w.Code)
	}
	if calls := it.dec.got(); len(calls) != 0 {
		t.Errorf("Decide called: %+v", calls)
	}
	if got := it.got(); len(got) != 0 {
		t.Errorf("replies %+v", got)
	}
}

func TestResponseURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://hooks.slack.com/actions/T1/1/x":     true,
		"https://hooks.slack-gov.com/actions/T1/1/x": true,
		"http://hooks.slack.com/actions/T1/1/x":      false,
		"https://hooks.slack.com.evil.example/x":     false,
		"https://user@hooks.slack.com/x":             false,
		"https://127.0.0.1/x":                        false,
	} {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		if ResponseURL(p) != ok {
			t.Errorf("ResponseURL(%s) = %v", u, !ok)
		}
	}
}

func TestNewInteractionsNeedsFuncs(t *testing.T) {
	if _, err := NewInteractions(InteractionsConfig{}); err == nil {
		t.Error("no funcs taken")
	}
	if _, err := NewSender(SenderConfig{}); err == nil {
		t.Error("no token func taken")
	}
}
