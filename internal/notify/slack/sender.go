package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	goslack "github.com/slack-go/slack"

	"github.com/drover-dev/drover/internal/notify"
	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Token returns the bot token (xoxb-...) the messages are posted
	// with; the server reads it from its sealed secret store. It is never
	// logged nor part of an error. An empty token is a permanent failure;
	// an error is retried (store.ErrNotFound: a permanent one, as the
	// dispatcher tells).
	Token func(ctx context.Context) (string, error)
	// APIURL is the Web API's base URL, ending in "/" (default
	// DefaultAPIURL; tests give an httptest server's).
	APIURL string
	// HTTPClient makes the API calls (default: a client with a 10s
	// timeout).
	HTTPClient *http.Client
}

// Sender posts notifications to Slack. It implements notify.Sender for
// targets of kind store.NotifySlack.
type Sender struct {
	cfg SenderConfig
}

var _ notify.Sender = (*Sender)(nil)

// NewSender returns a sender with cfg's defaults filled in; an error says
// what cfg lacks.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Token == nil {
		return nil, errors.New("slack sender: no Token func")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: defaultTimeout}
	}
	return &Sender{cfg: cfg}, nil
}

// Send implements notify.Sender: it posts one message about n to t's
// channel (its error channel for failures, when it has one).
func (s *Sender) Send(ctx context.Context, t store.NotifyTarget, n notify.Notification) error {
	if t.Kind != store.NotifySlack {
		return &notify.PermanentError{Err: fmt.Errorf("slack %s: target of kind %q, not %s", t.Name, t.Kind, store.NotifySlack)}
	}
	spec, err := ParseSpec(t.Spec)
	if err != nil {
		return &notify.PermanentError{Err: fmt.Errorf("slack %s: %w", t.Name, err)}
	}
	token, err := s.cfg.Token(ctx)
	if err != nil {
		return fmt.Errorf("slack %s: bot token: %w", t.Name, err)
	}
	if token == "" {
		return &notify.PermanentError{Err: fmt.Errorf("slack %s: no Slack bot token is configured on this server", t.Name)}
	}
	channel := ChannelFor(spec, n.Type)
	text, blocks := Message(n)
	api := goslack.New(token, goslack.OptionAPIURL(s.cfg.APIURL), goslack.OptionHTTPClient(s.cfg.HTTPClient))
	_, _, err = api.PostMessageContext(ctx, channel,
		goslack.MsgOptionText(text, false),
		goslack.MsgOptionBlocks(blocks...),
		goslack.MsgOptionDisableLinkUnfurl(),
	)
	if err != nil {
		return classify(t.Name, channel, token, err)
	}
	return nil
}

// ChannelFor is where a notification of type typ goes under spec.
func ChannelFor(spec Spec, typ string) string {
	if spec.ErrorChannel != "" && isFailure(typ) {
		return spec.ErrorChannel
	}
	return spec.Channel
}

// isFailure reports whether typ tells of a failure.
func isFailure(typ string) bool {
	return typ == state.NotifyChannelFailed || typ == state.NotifyChannelBlocked
}

// permanent are the Slack API errors no retry mends, with what to do.
//
//nolint:gosec // G101: Slack's error names, not credentials
var permanent = map[string]string{
	"channel_not_found":       "the channel does not exist or the bot cannot see it (a private channel: invite the bot)",
	"not_in_channel":          "invite the bot to the channel",
	"is_archived":             "the channel is archived",
	"invalid_auth":            "the bot token is not valid",
	"not_authed":              "no bot token was sent",
	"account_inactive":        "the bot token's user or app was deactivated",
	"token_revoked":           "the bot token was revoked",
	"token_expired":           "the bot token expired",
	"missing_scope":           "the bot token lacks the chat:write scope",
	"no_permission":           "the bot token has no permission to post",
	"restricted_action":       "the workspace does not let the bot post in the channel",
	"team_access_not_granted": "the bot token has no access to the workspace",
	"invalid_blocks":          "Slack refused the message's blocks",
	"msg_too_long":            "the message is too long",
}

// classify maps a Slack API error to the dispatcher's kinds, without the
// token.
func classify(target, channel, token string, err error) error {
	msg := strings.ReplaceAll(err.Error(), token, "[token]")
	var rl *goslack.RateLimitedError
	if errors.As(err, &rl) {
		return &notify.RetryAfterError{Err: fmt.Errorf("slack %s: rate limited by Slack, retry after %s", target, rl.RetryAfter), After: rl.RetryAfter}
	}
	var se goslack.SlackErrorResponse
	if errors.As(err, &se) {
		if hint, ok := permanent[se.Err]; ok {
			return &notify.PermanentError{Err: fmt.Errorf("slack %s: posting to %s: %s: %s", target, channel, se.Err, hint)}
		}
		return fmt.Errorf("slack %s: posting to %s: %s", target, channel, strings.ReplaceAll(se.Err, token, "[token]"))
	}
	return errors.New("slack " + target + ": posting to " + channel + ": " + msg)
}

// Slack's limits on block texts, in characters.
const (
	maxSectionText = 3000
	maxFallback    = 4000
)

// Message is n as a Slack message: the fallback text (notifications and
// clients without blocks) and the Block Kit blocks. An approval request has
// the Approve and Reject buttons.
func Message(n notify.Notification) (string, []goslack.Block) {
	p := notify.PayloadOf(n)
	head := Headline(p)
	var blocks []goslack.Block
	blocks = append(blocks, section("head", "*"+escape(head)+"*"))
	if p.Message != "" {
		blocks = append(blocks, section("message", escape(truncate(p.Message, maxSectionText))))
	}
	var facts []string
	if p.Version != "" {
		facts = append(facts, "*Version:* "+escape(p.Version))
	}
	if p.PreviousVersion != "" && p.PreviousVersion != p.Version {
		facts = append(facts, "*Previously:* "+escape(p.PreviousVersion))
	}
	if p.PushedBy != "" {
		facts = append(facts, "*Pushed by:* "+escape(p.PushedBy))
	}
	if p.Release != "" {
		facts = append(facts, "*Release:* "+escape(p.Release))
	}
	if p.Reason != "" {
		facts = append(facts, "*Reason:* "+escape(p.Reason))
	}
	if p.Link != "" {
		facts = append(facts, "<"+p.Link+"|Open in drover>")
	}
	if len(facts) > 0 {
		blocks = append(blocks, contextBlock("facts", strings.Join(facts, "  ·  ")))
	}
	if n.Type == state.NotifyApprovalRequested {
		if p.Preview != "" {
			blocks = append(blocks, section("preview", "```"+escape(truncate(p.Preview, maxSectionText-6))+"```"))
		}
		// Without all of what names the wait (not expected), the message
		// goes without buttons: the command still approves.
		if value, err := EncodeApproval(Approval{Application: p.Application, Service: p.Service, ReleaseChannel: p.ReleaseChannel, DesiredStateID: p.DesiredStateID}); err == nil {
			approve := goslack.NewButtonBlockElement(ActionApprove, value, goslack.NewTextBlockObject(goslack.PlainTextType, "Approve", false, false)).WithStyle(goslack.StylePrimary)
			reject := goslack.NewButtonBlockElement(ActionReject, value, goslack.NewTextBlockObject(goslack.PlainTextType, "Reject", false, false)).WithStyle(goslack.StyleDanger)
			blocks = append(blocks, goslack.NewActionBlock(blockActions, approve, reject))
		}
		if p.ApproveCommand != "" {
			blocks = append(blocks, contextBlock("command", "Or run `"+escape(p.ApproveCommand)+"`"))
		}
	}
	text := head
	if p.Message != "" {
		text += ": " + p.Message
	}
	return escape(truncate(text, maxFallback)), blocks
}

// Headline is the first line of a message about p, e.g. ":rocket: shop/web
// deployed v2 to prod".
func Headline(p notify.Payload) string {
	what := p.Application
	if p.Service != "" {
		what += "/" + p.Service
	}
	v := ""
	if p.Version != "" {
		v = " " + p.Version
	}
	in := ""
	if p.ReleaseChannel != "" {
		in = " in " + p.ReleaseChannel
	}
	switch p.Type {
	case state.NotifyServiceDeployed:
		return ":rocket: " + what + " deployed" + v + " to " + p.ReleaseChannel
	case state.NotifyServiceUpgraded:
		return ":arrow_up: " + what + " upgraded to" + v + in
	case state.NotifyServiceRolledBack:
		return ":rewind: " + what + " rolled back to" + v + in
	case state.NotifyApprovalRequested:
		return ":raised_hand: " + what + v + " waits for approval to go to " + p.ReleaseChannel
	case state.NotifyChannelBlocked:
		return ":no_entry: " + what + v + " is blocked" + in
	case state.NotifyChannelFailed:
		return ":x: " + what + v + " failed" + in
	case state.NotifyFreezeStarted:
		return ":snowflake: a freeze started for " + what + in
	}
	return what + ": " + p.Type + in
}

// section is a mrkdwn section block.
func section(id, mrkdwn string) *goslack.SectionBlock {
	return goslack.NewSectionBlock(goslack.NewTextBlockObject(goslack.MarkdownType, mrkdwn, false, false), nil, nil, goslack.SectionBlockOptionBlockID(id))
}

// contextBlock is a context block of one mrkdwn text.
func contextBlock(id, mrkdwn string) *goslack.ContextBlock {
	return goslack.NewContextBlock(id, goslack.NewTextBlockObject(goslack.MarkdownType, mrkdwn, false, false))
}

// escape escapes Slack's control characters in text.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// truncate cuts s to at most n characters (runes, with an ellipsis).
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
