package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	goslack "github.com/slack-go/slack"
)

// MaxBody is the largest interaction request the handler reads.
const MaxBody = 64 << 10

// defaultTimeout bounds a call to Slack.
const defaultTimeout = 10 * time.Second

// ErrAlreadyDecided is what Decide returns (wrapped, with what was decided
// before) when the person already decided on this wait: they are told so
// and the message stays as it is.
var ErrAlreadyDecided = errors.New("already decided")

// Decision is a click on an approval button.
type Decision struct {
	// Approve is true for Approve, false for Reject.
	Approve bool
	// Approval is the wait decided on, from the button's value.
	Approval
	// SlackTeamID and SlackUserID are who clicked (for the audit trail).
	SlackTeamID string
	SlackUserID string
}

// Outcome is what a decision came to.
type Outcome struct {
	// Text tells who decided and where the wait stands, e.g. "approved by
	// alice (1 of 2)"; default "approved by <identity>" or "rejected by
	// <identity>".
	Text string
	// Final is true when the wait is over (approved by enough people, or
	// rejected): the buttons are removed from the message.
	Final bool
}

// InteractionsConfig configures an Interactions handler.
type InteractionsConfig struct {
	// SigningSecret returns the Slack app's signing secret (required).
	SigningSecret func(ctx context.Context) (string, error)
	// Identity maps a Slack user of a Slack team (workspace) to a drover
	// identity; ok false: the user is not mapped, and nothing is decided
	// (required).
	Identity func(ctx context.Context, slackTeamID, slackUserID string) (identity string, ok bool)
	// Decide records a decision of identity (required): it checks that
	// identity may decide on the wait, as the API does. An error wrapping
	// ErrAlreadyDecided says identity already decided on the wait; any
	// other error is told to the person as it is.
	Decide func(ctx context.Context, identity string, d Decision) (Outcome, error)
	// HTTPClient posts to the payloads' response_url (default: a client
	// with a 10s timeout).
	HTTPClient *http.Client
	// AllowResponseURL reports whether a payload's response_url may be
	// posted to (default: https on hooks.slack.com or hooks.slack-gov.com;
	// tests allow their httptest servers).
	AllowResponseURL func(u *url.URL) bool
	// UnmappedHint tells an unmapped Slack user how to get mapped, in
	// Slack mrkdwn (default: ask a drover admin to map the Slack user and
	// team IDs; the server should name its command).
	UnmappedHint func(slackTeamID, slackUserID string) string
	// DecideTimeout bounds Decide (default 2s: Slack waits 3s for the
	// answer).
	DecideTimeout time.Duration
	// ReplyTimeout bounds a post to response_url (default 10s).
	ReplyTimeout time.Duration
	Log          *slog.Logger
}

// Interactions is the http.Handler of Slack's interactivity request URL:
// it takes the Approve and Reject clicks of approval requests.
type Interactions struct {
	cfg InteractionsConfig
	wg  sync.WaitGroup

	mu sync.Mutex
	// seen holds the signatures of the requests taken, until their
	// timestamp is out of the window: a replay within it is refused too.
	seen map[string]time.Time
}

// replayWindow is how long a signature is remembered: timestamps are
// taken up to five minutes either side of now.
const replayWindow = 10 * time.Minute

// NewInteractions returns a handler with cfg's defaults filled in; an
// error says what cfg lacks.
func NewInteractions(cfg InteractionsConfig) (*Interactions, error) {
	switch {
	case cfg.SigningSecret == nil:
		return nil, errors.New("slack interactions: no SigningSecret func")
	case cfg.Identity == nil:
		return nil, errors.New("slack interactions: no Identity func")
	case cfg.Decide == nil:
		return nil, errors.New("slack interactions: no Decide func")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: defaultTimeout}
	}
	if cfg.AllowResponseURL == nil {
		cfg.AllowResponseURL = ResponseURL
	}
	if cfg.UnmappedHint == nil {
		cfg.UnmappedHint = func(team, user string) string {
			return fmt.Sprintf("Ask a drover admin to map your Slack user %s (workspace %s) to your drover identity.", user, team)
		}
	}
	if cfg.DecideTimeout <= 0 {
		cfg.DecideTimeout = 2 * time.Second
	}
	if cfg.ReplyTimeout <= 0 {
		cfg.ReplyTimeout = defaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Interactions{cfg: cfg, seen: map[string]time.Time{}}, nil
}

// ResponseURL reports whether u is one of Slack's response URLs
// (https on hooks.slack.com or hooks.slack-gov.com): the default
// AllowResponseURL.
func ResponseURL(u *url.URL) bool {
	return u.Scheme == "https" && u.User == nil && (u.Host == "hooks.slack.com" || u.Host == "hooks.slack-gov.com")
}

// Wait waits for the replies still being posted to response URLs (at
// shutdown; tests).
func (h *Interactions) Wait() { h.wg.Wait() }

// ServeHTTP implements http.Handler. It answers 401 to a request Slack did
// not sign, signed more than five minutes ago, or already taken (a
// replay), and does nothing else then; a signed click is answered 200 once decided, the message updated
// (or the person told why not) through response_url afterwards.
func (h *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST Slack's interaction payloads here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body over %d bytes", MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the request body failed", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	secret, err := h.cfg.SigningSecret(ctx)
	if err != nil || secret == "" {
		h.cfg.Log.Error("slack interaction refused: the signing secret is not available", "error", err)
		http.Error(w, "Slack interactions are not configured on this server", http.StatusServiceUnavailable)
		return
	}
	if err := verify(r.Header, secret, body); err != nil {
		h.cfg.Log.Warn("slack interaction refused", "remote", r.RemoteAddr, "error", err)
		http.Error(w, "not signed by Slack: "+err.Error(), http.StatusUnauthorized)
		return
	}
	if h.replayed(r.Header.Get("X-Slack-Signature"), time.Now()) {
		h.cfg.Log.Warn("slack interaction refused: replayed", "remote", r.RemoteAddr)
		http.Error(w, "this request was already taken (a replay?)", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		http.Error(w, "no payload= form field", http.StatusBadRequest)
		return
	}
	var ic goslack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &ic); err != nil {
		http.Error(w, "payload is not Slack's interaction JSON", http.StatusBadRequest)
		return
	}
	if ic.Type != goslack.InteractionTypeBlockActions {
		w.WriteHeader(http.StatusOK) // nothing drover does
		return
	}
	var action *goslack.BlockAction
	for _, a := range ic.ActionCallback.BlockActions {
		if a != nil && (a.ActionID == ActionApprove || a.ActionID == ActionReject) {
			action = a
			break
		}
	}
	if action == nil {
		w.WriteHeader(http.StatusOK) // another button (a link)
		return
	}
	replyTo, err := url.Parse(ic.ResponseURL)
	if err != nil || !h.cfg.AllowResponseURL(replyTo) {
		h.cfg.Log.Warn("slack interaction refused: its response_url is not Slack's", "host", hostOf(replyTo))
		http.Error(w, "response_url is not one of Slack's", http.StatusBadRequest)
		return
	}
	team := ic.Team.ID
	if team == "" {
		team = ic.User.TeamID
	}
	user := ic.User.ID
	identity, ok := h.cfg.Identity(ctx, team, user)
	if !ok || identity == "" {
		h.cfg.Log.Info("slack interaction refused: user not mapped", "slack_team", team, "slack_user", user)
		h.reply(replyTo, ephemeral(":warning: You are not mapped to a drover identity, so nothing was recorded. "+h.cfg.UnmappedHint(team, user)))
		w.WriteHeader(http.StatusOK)
		return
	}
	a, err := DecodeApproval(action.Value)
	if err != nil {
		h.reply(replyTo, ephemeral(":warning: This button is not one drover understands ("+escape(err.Error())+"); nothing was recorded."))
		w.WriteHeader(http.StatusOK)
		return
	}
	d := Decision{Approve: action.ActionID == ActionApprove, Approval: a, SlackTeamID: team, SlackUserID: user}
	dctx, cancel := context.WithTimeout(ctx, h.cfg.DecideTimeout)
	out, err := h.cfg.Decide(dctx, identity, d)
	cancel()
	verb, done := "reject", "rejected"
	if d.Approve {
		verb, done = "approve", "approved"
	}
	switch {
	case errors.Is(err, ErrAlreadyDecided):
		msg := ":information_source: You already decided on " + a.String()
		if d.Approve {
			msg = ":information_source: You already approved " + a.String()
		}
		if detail := strings.TrimSuffix(err.Error(), ": "+ErrAlreadyDecided.Error()); detail != ErrAlreadyDecided.Error() {
			msg += " (" + escape(detail) + ")"
		}
		h.reply(replyTo, ephemeral(msg+"; nothing changed."))
	case err != nil:
		h.cfg.Log.Info("slack decision failed", "identity", identity, "approval", a.String(), "approve", d.Approve, "error", err)
		h.reply(replyTo, ephemeral(fmt.Sprintf(":warning: Could not %s %s: %s", verb, a, escape(err.Error()))))
	default:
		h.cfg.Log.Info("slack decision", "identity", identity, "approval", a.String(), "approve", d.Approve, "final", out.Final)
		status := out.Text
		if status == "" {
			status = done + " by " + identity
		}
		icon := ":no_entry_sign: "
		if d.Approve {
			icon = ":white_check_mark: "
		}
		h.reply(replyTo, updated(ic.Message, icon+status, out.Final))
	}
	w.WriteHeader(http.StatusOK)
}

// verify checks Slack's signature of body (v0, HMAC-SHA256 of
// "v0:timestamp:body" keyed with secret) and that it was made within five
// minutes.
func verify(h http.Header, secret string, body []byte) error {
	sv, err := goslack.NewSecretsVerifier(h, secret)
	switch {
	case errors.Is(err, goslack.ErrExpiredTimestamp):
		return errors.New("timestamp more than 5 minutes away (a replay?)")
	case errors.Is(err, goslack.ErrMissingHeaders):
		return errors.New("no X-Slack-Signature or X-Slack-Request-Timestamp header")
	case err != nil:
		return errors.New("malformed signature or timestamp")
	}
	if _, err := sv.Write(body); err != nil {
		return err
	}
	if sv.Ensure() != nil {
		return errors.New("wrong signature")
	}
	return nil
}

// replayed reports whether a request signed sig was taken before (within
// replayWindow), and remembers sig.
func (h *Interactions) replayed(sig string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, until := range h.seen {
		if now.After(until) {
			delete(h.seen, k)
		}
	}
	if _, ok := h.seen[sig]; ok {
		return true
	}
	h.seen[sig] = now.Add(replayWindow)
	return false
}

// ephemeral is a reply only the person who clicked sees, the message left
// as it is.
func ephemeral(text string) *goslack.WebhookMessage {
	return &goslack.WebhookMessage{ResponseType: goslack.ResponseTypeEphemeral, Text: text}
}

// updated is orig with status in place of its former status, without its
// buttons when final.
func updated(orig goslack.Message, status string, final bool) *goslack.WebhookMessage {
	var blocks []goslack.Block
	for _, b := range orig.Blocks.BlockSet {
		if b.ID() == blockStatus || (final && b.ID() == blockActions) {
			continue
		}
		blocks = append(blocks, b)
	}
	blocks = append(blocks, contextBlock(blockStatus, escape(status)))
	text := orig.Text
	if text == "" {
		text = escape(status)
	}
	return &goslack.WebhookMessage{Text: text, Blocks: &goslack.Blocks{BlockSet: blocks}, ReplaceOriginal: true}
}

// reply posts msg to the response URL u in the background, bounded by
// ReplyTimeout. The URL is not logged: it is a capability.
func (h *Interactions) reply(u *url.URL, msg *goslack.WebhookMessage) {
	body, err := json.Marshal(msg)
	if err != nil {
		h.cfg.Log.Error("slack reply not encoded", "error", err)
		return
	}
	h.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.ReplyTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			h.cfg.Log.Warn("slack reply not posted", "error", "bad request")
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.cfg.HTTPClient.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // without the URL
			}
			h.cfg.Log.Warn("slack reply not posted", "host", u.Host, "error", err)
			return
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode/100 != 2 {
			h.cfg.Log.Warn("slack reply refused", "host", u.Host, "status", resp.StatusCode, "body", strings.TrimSpace(string(got)))
		}
	})
}

// hostOf is u's host, for logs.
func hostOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Host
}
