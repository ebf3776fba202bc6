// Package slack delivers drover's notifications to Slack channels and
// takes approvals from Slack's buttons.
//
// A Sender posts one message per notification (chat.postMessage with a bot
// token) to the channel of a target of kind store.NotifySlack; failures
// (channel.failed, channel.blocked) go to the target's error channel when it
// has one. An approval request carries Approve and Reject buttons whose
// value names the wait (EncodeApproval).
//
// An Interactions handler serves Slack's interactivity request URL: it
// verifies Slack's signature, maps the Slack user to a drover identity and
// hands the decision to the server (InteractionsConfig.Decide), then
// updates the message through the payload's response_url.
package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Spec is the Spec (JSON) of a target of kind store.NotifySlack: an
// application's notifications.slack.
type Spec struct {
	// Channel is where notifications go: "#name", "name" or a channel ID
	// ("C0123ABC").
	Channel string `json:"channel"`
	// ErrorChannel, when set, is where notifications of failures
	// (channel.failed, channel.blocked) go instead of Channel.
	ErrorChannel string `json:"errorChannel,omitempty"`
}

var (
	// channelNameRE is a Slack channel name, with or without its "#":
	// lowercase letters, digits, - _ and . (Slack's rules), up to 80.
	channelNameRE = regexp.MustCompile(`^#?[a-z0-9_][a-z0-9_.-]{0,79}$`)
	// channelIDRE is a Slack conversation ID: a public (C) or private (G)
	// channel.
	channelIDRE = regexp.MustCompile(`^[CG][A-Z0-9]{6,20}$`)
)

// CheckChannel says what is wrong with c as a Slack channel, or nil.
func CheckChannel(c string) error {
	if c == "" {
		return errors.New("give a channel")
	}
	if !channelNameRE.MatchString(c) && !channelIDRE.MatchString(c) {
		return fmt.Errorf("%q is neither a channel name (#name: lowercase letters, digits, - _ ., up to 80) nor a channel ID (C0123ABC)", c)
	}
	return nil
}

// CheckSpec says what is wrong with s, or nil.
func CheckSpec(s Spec) error {
	if err := CheckChannel(s.Channel); err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	if s.ErrorChannel != "" {
		if err := CheckChannel(s.ErrorChannel); err != nil {
			return fmt.Errorf("errorChannel: %w", err)
		}
	}
	return nil
}

// ParseSpec decodes a target's Spec (unknown fields refused) and checks it.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("slack settings: %w", err)
	}
	if err := CheckSpec(s); err != nil {
		return Spec{}, fmt.Errorf("slack settings: %w", err)
	}
	return s, nil
}

// Action IDs of the approval buttons.
const (
	ActionApprove = "drover_approve"
	ActionReject  = "drover_reject"
)

// Block IDs of the blocks the handler finds again in a message it updates.
const (
	// blockActions holds the approval buttons.
	blockActions = "drover_actions"
	// blockStatus tells who decided.
	blockStatus = "drover_status"
)

// Approval names the wait an approval button decides: the desired state of
// a service waiting in a release channel. It is the buttons' value.
type Approval struct {
	Application    string `json:"app"`
	Service        string `json:"svc"`
	ReleaseChannel string `json:"ch"`
	DesiredStateID string `json:"ds"`
}

// String names a for people: "shop/web in prod".
func (a Approval) String() string {
	return a.Application + "/" + a.Service + " in " + a.ReleaseChannel
}

// maxValue is the longest button value Slack takes.
const maxValue = 2000

// check says what is missing from a, or nil.
func (a Approval) check() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"application", a.Application}, {"service", a.Service},
		{"release channel", a.ReleaseChannel}, {"desired state id", a.DesiredStateID},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("approval value: no %s", strings.Join(missing, ", "))
	}
	return nil
}

// EncodeApproval is a as a button value (small JSON).
func EncodeApproval(a Approval) (string, error) {
	if err := a.check(); err != nil {
		return "", err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	if len(b) > maxValue {
		return "", fmt.Errorf("approval value: %d bytes, Slack takes at most %d", len(b), maxValue)
	}
	return string(b), nil
}

// DecodeApproval is the approval a button value names; an error says what
// is wrong with it.
func DecodeApproval(v string) (Approval, error) {
	var a Approval
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Approval{}, fmt.Errorf("approval value: not drover's JSON: %w", err)
	}
	if err := a.check(); err != nil {
		return Approval{}, err
	}
	return a, nil
}
