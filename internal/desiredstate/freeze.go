package desiredstate

import (
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/labelquery"
)

// Freeze stops the line (drover freeze, drover's own): while it is active,
// no release channel in its scope starts a new rollout; drift healing of
// what already runs goes on unless NoHeal. Freezes are stored as versioned
// objects of kind FreezeKind, named by ID: a lift is a new version.
type Freeze struct {
	ID string `json:"id"`
	// Application limits the scope to one application ("" = all).
	Application string `json:"application,omitempty"`
	// ReleaseChannel limits it to the release channels it names: a
	// channel name, or a label query over the channel's labels (@name,
	// @application, @group, @type=release-channel and its own labels).
	// "" = every channel.
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	Reason         string `json:"reason"`
	// NoHeal holds drift healing too.
	NoHeal    bool      `json:"noHeal,omitempty"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	// Until ends the freeze by itself (zero: only drover unfreeze does).
	Until time.Time `json:"until,omitzero"`
	// LiftedBy and LiftedAt: who lifted it (drover unfreeze), and when.
	LiftedBy string    `json:"liftedBy,omitempty"`
	LiftedAt time.Time `json:"liftedAt,omitzero"`
	Comment  string    `json:"comment,omitempty"`
}

// FreezeKind is the stored kind of freezes.
const FreezeKind = "freeze"

// Active reports whether f holds at now.
func (f *Freeze) Active(now time.Time) bool {
	return f.LiftedAt.IsZero() && (f.Until.IsZero() || now.Before(f.Until))
}

// ParseChannelScope checks a freeze's release channel scope: a channel
// name or a label query.
func ParseChannelScope(s string) error {
	if s == "" || validChannelName(s) {
		return nil
	}
	if _, err := labelquery.Parse(s); err != nil {
		return fmt.Errorf("release channel %q is neither a release channel name nor a label query: %w", s, err)
	}
	return nil
}

// Covers reports whether f's scope holds channel ch of application app.
func (f *Freeze) Covers(app string, ch *Channel) bool {
	if f.Application != "" && f.Application != app {
		return false
	}
	switch sel := f.ReleaseChannel; {
	case sel == "":
		return true
	case validChannelName(sel):
		return sel == ch.Name
	default:
		q, err := labelquery.Parse(sel)
		if err != nil {
			return true // checked when the freeze was made; hold rather than let through
		}
		l := labelquery.Labels{"@type": "release-channel", "@name": ch.Name, "@id": ch.Name, "@application": app}
		if ch.Group != "" {
			l["@group"] = ch.Group
		}
		for k, v := range ch.Labels {
			l[k] = v
		}
		return q.Match(l)
	}
}

// Describe says who froze what and why, for a held channel's message.
func (f *Freeze) Describe() string {
	s := fmt.Sprintf("frozen by %s since %s", f.CreatedBy, f.CreatedAt.UTC().Format(time.RFC3339))
	if !f.Until.IsZero() {
		s += " until " + f.Until.UTC().Format(time.RFC3339)
	}
	return s + ": " + f.Reason + " (" + f.ID + "; drover unfreeze to lift)"
}

// validChannelName reports whether s is a plain release channel name
// (lower-case letters, digits and dashes).
func validChannelName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'; !plain {
			return false
		}
	}
	return s != ""
}
