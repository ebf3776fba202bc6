package desiredstate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Lifecycle phases of a protection check.
const (
	PhasePreApproval    = "preApproval"
	PhasePostApproval   = "postApproval"
	PhaseDeployment     = "deployment"
	PhasePostDeployment = "postDeployment"
)

// Failure behaviours of a deployment check.
const (
	FailureBlock = "BLOCK"
	FailureFail  = "FAIL"
)

// Builtin is a protection drover evaluates itself, from the time alone
// (builtin.alwaysPassing, alwaysFailing, allowedTimes; a commitDenylist
// is decided by the compiler, and stored as passing or failing with why).
type Builtin struct {
	AlwaysPassing bool `json:"alwaysPassing,omitempty"`
	// AlwaysFailing fails with Message (AlwaysPassing passes with it).
	AlwaysFailing bool   `json:"alwaysFailing,omitempty"`
	Message       string `json:"message,omitempty"`
	// AllowedTimes passes inside any of its windows.
	AllowedTimes []Window `json:"allowedTimes,omitempty"`
}

// Window is an allowedTimes window: the weekdays (0 = Sunday) and hours
// (0-23) it allows, in the IANA time zone TZ.
type Window struct {
	Days  []int  `json:"days"`
	Hours []int  `json:"hours"`
	TZ    string `json:"tz"`
	// Text is the window as configured, for people: "mon-fri 9-17 Europe/Berlin".
	Text string `json:"text,omitempty"`
}

// locations caches time zones by name: time.LoadLocation reads the zone
// database each time, and windows are evaluated on every pass.
var locations sync.Map // string -> *time.Location

// location is w's time zone (UTC when it cannot be loaded: the compiler
// checked it).
func (w Window) location() *time.Location {
	if loc, ok := locations.Load(w.TZ); ok {
		return loc.(*time.Location)
	}
	loc, err := time.LoadLocation(w.TZ)
	if err != nil {
		return time.UTC
	}
	locations.Store(w.TZ, loc)
	return loc
}

// Contains reports whether t is inside the window.
func (w Window) Contains(t time.Time) bool {
	t = t.In(w.location())
	return slices.Contains(w.Days, int(t.Weekday())) && slices.Contains(w.Hours, t.Hour())
}

// Result is the outcome of a builtin at one time: whether it passes, why
// (for people), and when the outcome can change next (zero: never).
type Result struct {
	Pass    bool
	Message string
	Until   time.Time
}

// Evaluate evaluates b at now.
func (b *Builtin) Evaluate(now time.Time) Result {
	switch {
	case b.AlwaysFailing:
		msg := b.Message
		if msg == "" {
			msg = "always failing"
		}
		return Result{Message: msg}
	case len(b.AllowedTimes) > 0:
		in := b.inWindow(now)
		until := b.nextChange(now, in)
		var texts []string
		for _, w := range b.AllowedTimes {
			texts = append(texts, w.Text)
		}
		if in {
			msg := "inside the allowed times (" + strings.Join(texts, "; ") + ")"
			if !until.IsZero() {
				msg += " until " + until.UTC().Format(time.RFC3339)
			}
			return Result{Pass: true, Message: msg, Until: until}
		}
		msg := "outside the allowed times (" + strings.Join(texts, "; ") + ")"
		if !until.IsZero() {
			msg += fmt.Sprintf(" until %s (%s)", until.UTC().Format(time.RFC3339), until.In(b.AllowedTimes[0].location()).Format("Mon 15:04 MST"))
		}
		return Result{Message: msg, Until: until}
	default:
		msg := b.Message
		if msg == "" {
			msg = "always passing"
		}
		return Result{Pass: true, Message: msg}
	}
}

func (b *Builtin) inWindow(t time.Time) bool {
	for _, w := range b.AllowedTimes {
		if w.Contains(t) {
			return true
		}
	}
	return false
}

// nextChange is the first hour boundary (in any window's time zone) after
// now where being inside the windows differs from in; zero when it never
// changes within 8 days (always or never allowed).
func (b *Builtin) nextChange(now time.Time, in bool) time.Time {
	t := now
	for range 8 * 24 * (len(b.AllowedTimes) + 1) {
		next := time.Time{}
		for _, w := range b.AllowedTimes {
			lt := t.In(w.location())
			h := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), 0, 0, 0, lt.Location()).Add(time.Hour)
			if next.IsZero() || h.Before(next) {
				next = h
			}
		}
		if next.Sub(now) > 8*24*time.Hour {
			return time.Time{}
		}
		if b.inWindow(next) != in {
			return next
		}
		t = next
	}
	return time.Time{}
}

// Attachment is a protection attachment of a release channel as the
// compiler's result lists it (read by field name): what completes the
// protection checks the graph names.
type Attachment struct {
	Attachment string                `json:"attachment"`
	Protection string                `json:"protection"`
	Source     string                `json:"source"`
	Lifecycle  []AttachmentLifecycle `json:"lifecycle"`
	Builtin    *Builtin              `json:"builtin"`
	// Command and PollInterval: a protection that runs a command; Gate,
	// one a registered evaluator decides (stored as a member named by its
	// kind, as in a Check).
	Command      json.RawMessage `json:"command"`
	PollInterval Duration        `json:"pollInterval"`
	Gate         *Gate           `json:"-"`
}

// attachmentFields are an Attachment's fields, decoded as encoding/json
// does.
type attachmentFields Attachment

// UnmarshalJSON reads an attachment and its gate.
func (a *Attachment) UnmarshalJSON(b []byte) error {
	var f attachmentFields
	g, err := UnmarshalGated(b, &f)
	if err != nil {
		return fmt.Errorf("protection attachment: %w", err)
	}
	*a = Attachment(f)
	a.Gate = g
	return nil
}

// AttachmentLifecycle is one lifecycle item of an attachment.
type AttachmentLifecycle struct {
	PreApproval  *struct{} `json:"preApproval"`
	PostApproval *struct{} `json:"postApproval"`
	Deployment   *struct {
		FailureBehavior string `json:"failureBehavior"`
	} `json:"deployment"`
	PostDeployment *struct {
		DelayCheckDuration Duration `json:"delayCheckDuration"`
		CheckDuration      Duration `json:"checkDuration"`
	} `json:"postDeployment"`
}

// CompleteChecks adds to each protection check what its attachment says:
// the builtin and its lifecycle's settings.
func CompleteChecks(checks []Check, atts []Attachment) {
	for i := range checks {
		chk := &checks[i]
		if chk.Kind != CheckProtection {
			continue
		}
		for _, a := range atts {
			if a.Source != chk.Source || a.Attachment != chk.Attachment {
				continue
			}
			chk.Builtin = a.Builtin
			switch {
			case chk.Builtin != nil:
			case a.Gate != nil:
				chk.Gate, chk.PollInterval = a.Gate, a.PollInterval
			case len(a.Command) > 0 && string(a.Command) != "null":
				chk.Command, chk.PollInterval = a.Command, a.PollInterval
			}
			for _, l := range a.Lifecycle {
				switch {
				case l.Deployment != nil && chk.Lifecycle == PhaseDeployment:
					chk.FailureBehavior = FailureBlock
					if l.Deployment.FailureBehavior == FailureFail {
						chk.FailureBehavior = FailureFail
					}
				case l.PostDeployment != nil && chk.Lifecycle == PhasePostDeployment:
					chk.DelayCheck = l.PostDeployment.DelayCheckDuration
					chk.CheckFor = l.PostDeployment.CheckDuration
				}
			}
			break
		}
	}
}

// Extension is a convergence extension of a release channel as the
// compiler's result lists it (read by field name).
type Extension struct {
	Name        string          `json:"name"`
	Command     json.RawMessage `json:"command"`
	SharedKey   string          `json:"sharedKey"`
	RetryPolicy *struct {
		BaseInterval Duration `json:"baseInterval"`
		MaxInterval  Duration `json:"maxInterval"`
	} `json:"retryPolicy"`
	Dependencies []string `json:"dependencies"`
}

// Extension lifecycle phases (Prodvana's names).
const (
	ExtPreApproval    = "PRE_APPROVAL"
	ExtApproval       = "APPROVAL"
	ExtPostApproval   = "POST_APPROVAL"
	ExtDeployment     = "DEPLOYMENT"
	ExtPostDeployment = "POST_DEPLOYMENT"
)

// CompleteExtensions adds to each convergence extension check what the
// compiler resolved: its command, shared key, retry policy, dependencies.
func CompleteExtensions(checks []Check, exts []Extension) {
	for i := range checks {
		chk := &checks[i]
		if chk.Kind != CheckConvergenceExtension {
			continue
		}
		for _, e := range exts {
			if e.Name != chk.Name {
				continue
			}
			if len(e.Command) > 0 && string(e.Command) != "null" {
				chk.Command = e.Command
			}
			chk.Shared, chk.DependsOn = e.SharedKey, e.Dependencies
			if e.RetryPolicy != nil {
				chk.Retry = &Retry{Base: e.RetryPolicy.BaseInterval, Max: e.RetryPolicy.MaxInterval}
			}
			break
		}
	}
}
