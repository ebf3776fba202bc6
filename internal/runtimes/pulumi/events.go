package pulumi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// previewResult is what pulumi preview --json prints: one JSON object.
type previewResult struct {
	Steps         []step         `json:"steps"`
	Diagnostics   []diagnostic   `json:"diagnostics"`
	ChangeSummary map[string]int `json:"changeSummary"`
}

// step is one step of a preview: an operation on a resource.
type step struct {
	Op  string `json:"op"`
	URN string `json:"urn"`
}

// diagnostic is a message of pulumi's JSON output.
type diagnostic struct {
	URN      string `json:"urn"`
	Prefix   string `json:"prefix"`
	Message  string `json:"message"`
	Severity string `json:"severity"`
}

// parsePreview reads preview's output ("" is an empty result).
func parsePreview(stdout string) (previewResult, error) {
	var res previewResult
	if strings.TrimSpace(stdout) == "" {
		return res, nil
	}
	err := json.Unmarshal([]byte(stdout), &res)
	return res, err
}

// changed reports whether the preview proposes a change: a step other than
// same (refresh and read steps are not counted in changeSummary).
func (p previewResult) changed() bool {
	for op, n := range p.ChangeSummary {
		if n > 0 && op != "same" {
			return true
		}
	}
	return false
}

// summary says what the preview would do to resources (the stack itself
// and providers not counted), as terraform's plan summary does: "Preview: 1
// to create, 2 to update, 0 to delete." (replacements, when any, as ", 1
// to replace").
func (p previewResult) summary() string {
	n := map[string]int{}
	seen := map[step]bool{}
	for _, st := range p.Steps {
		if resource(st.URN) && !seen[st] {
			seen[st] = true
			n[st.Op]++
		}
	}
	s := fmt.Sprintf("Preview: %d to create, %d to update, %d to delete", n["create"], n["update"], n["delete"])
	if r := n["replace"]; r > 0 {
		s += fmt.Sprintf(", %d to replace", r)
	}
	if n["create"]+n["update"]+n["delete"]+n["replace"] == 0 {
		s += " (changes to the stack's outputs only)"
	}
	return s + "."
}

// resource reports whether urn names a resource drover reports: not the
// stack itself nor a provider.
func resource(urn string) bool {
	typ := urnType(urn)
	return typ != "" && typ != "pulumi:pulumi:Stack" && !strings.HasPrefix(typ, "pulumi:providers:")
}

// changes are the changes the preview proposes, per resource.
func (p previewResult) changes(rd *redact.Redactor) []runtimes.Change {
	c := newChangeSet()
	for _, st := range p.Steps {
		c.add(st.Op, st.URN, rd)
	}
	return c.list
}

// errors is the preview's error diagnostics, on one line.
func (p previewResult) errors() string {
	return joinErrors(p.Diagnostics)
}

// joinErrors joins the messages of error diagnostics.
func joinErrors(ds []diagnostic) string {
	var msgs []string
	for _, d := range ds {
		if d.Severity != "error" {
			continue
		}
		m := oneLine(d.Message)
		if m == "" || m == "update failed" || m == "preview failed" {
			continue
		}
		if d.URN != "" {
			m = urnObject(d.URN) + ": " + m
		}
		if !slices.Contains(msgs, m) {
			msgs = append(msgs, m)
		}
	}
	return clip(strings.Join(msgs, "; "))
}

// previewError is the error of a failed preview: pulumi's error
// diagnostics, else the error lines of its stderr.
func previewError(ctx context.Context, what string, o iacrun.Outcome, res previewResult) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	msg := res.errors()
	if msg == "" {
		msg = errorExcerpt(o.Stderr)
	}
	if msg == "" {
		msg = o.Err.Error()
	}
	return fmt.Errorf("%s failed (exit code %d): %s", what, o.ExitCode, msg)
}

// commandError turns a failed command (not printing JSON) into an error.
func commandError(ctx context.Context, what string, o iacrun.Outcome) error {
	return previewError(ctx, what, o, previewResult{})
}

// events is what pulumi up --json printed: engine events, one per line.
type events struct {
	changes     []runtimes.Change
	diagnostics []diagnostic
	failed      bool // a resource operation or the update failed
}

// parseEvents reads up's event stream; lines that are not events are
// skipped.
func parseEvents(stdout string, rd *redact.Redactor) events {
	var ev events
	c := newChangeSet()
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 0, 64<<10), fullStdout)
	for sc.Scan() {
		var e struct {
			Diagnostic *diagnostic `json:"diagnosticEvent"`
			ResOutputs *struct {
				Metadata struct {
					Op  string `json:"op"`
					URN string `json:"urn"`
				} `json:"metadata"`
			} `json:"resOutputsEvent"`
			ResOpFailed *struct {
				Metadata struct {
					Op  string `json:"op"`
					URN string `json:"urn"`
				} `json:"metadata"`
			} `json:"resOpFailedEvent"`
			Summary *struct {
				Result string `json:"result"`
			} `json:"summaryEvent"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch {
		case e.Diagnostic != nil:
			ev.diagnostics = append(ev.diagnostics, *e.Diagnostic)
		case e.ResOutputs != nil:
			c.add(e.ResOutputs.Metadata.Op, e.ResOutputs.Metadata.URN, rd)
		case e.ResOpFailed != nil:
			ev.failed = true
		case e.Summary != nil && e.Summary.Result != "" && e.Summary.Result != "succeeded":
			ev.failed = true
		}
	}
	ev.changes = c.list
	return ev
}

// upError is the error of a failed up. A locked stack and a plan the
// program no longer matches are retryable: the next Apply previews again.
func upError(ctx context.Context, o iacrun.Outcome, ev events) error {
	if ctx.Err() != nil {
		return fmt.Errorf("pulumi up: %w", ctx.Err())
	}
	msg := joinErrors(ev.diagnostics)
	if msg == "" {
		msg = errorExcerpt(o.Stderr)
	}
	if msg == "" && o.Err != nil {
		msg = o.Err.Error()
	}
	if retryable(msg + "\n" + o.Stderr) {
		return fmt.Errorf("pulumi up: %s (retrying previews again)", msg)
	}
	return fmt.Errorf("pulumi up failed (exit code %d): %s", o.ExitCode, msg)
}

// retryable reports whether an up failed for a reason another preview and
// up may not hit (Prodvana's retryable exit code 2): the stack is locked
// by another update, or the saved plan is stale.
func retryable(out string) bool {
	return strings.Contains(out, "the stack is currently locked") ||
		strings.Contains(out, "another update is currently in progress") ||
		strings.Contains(out, "violates plan")
}

// changeSet collects changes per resource, in order.
type changeSet struct {
	list []runtimes.Change
	at   map[string]int
}

func newChangeSet() *changeSet { return &changeSet{at: map[string]int{}} }

// add records the step op on the resource urn (providers and the stack
// itself are not objects drover reports).
func (c *changeSet) add(op, urn string, rd *redact.Redactor) {
	if !resource(urn) {
		return
	}
	var a runtimes.Action
	switch op {
	case "create":
		a = runtimes.ActionCreated
	case "update", "replace", "create-replacement", "delete-replaced", "import", "import-replacement":
		a = runtimes.ActionConfigured
	case "delete", "discard":
		a = runtimes.ActionDeleted
	case "same":
		a = runtimes.ActionUnchanged
	default: // refresh, read
		return
	}
	obj := rd.Text(urnObject(urn))
	if i, ok := c.at[obj]; ok {
		if prev := c.list[i].Action; prev != a && a != runtimes.ActionUnchanged {
			if prev == runtimes.ActionUnchanged {
				c.list[i].Action = a
			} else {
				// Deleted and created again (a replacement).
				c.list[i].Action = runtimes.ActionConfigured
			}
		}
		return
	}
	c.at[obj] = len(c.list)
	c.list = append(c.list, runtimes.Change{Object: obj, Action: a})
}

// urnType is the type of a resource URN
// (urn:pulumi:<stack>::<project>::<parent types$>type::<name>), its last
// one when parents are named.
func urnType(urn string) string {
	parts := strings.SplitN(urn, "::", 4)
	if len(parts) < 4 {
		return ""
	}
	typ := parts[2]
	return typ[strings.LastIndexByte(typ, '$')+1:]
}

// urnObject names a resource as drover reports it: "<type>/<name>"
// ("drovertest:index:File/site").
func urnObject(urn string) string {
	parts := strings.SplitN(urn, "::", 4)
	if len(parts) < 4 {
		return urn
	}
	return urnType(urn) + "/" + parts[3]
}

// errorExcerpt is the part of pulumi's stderr worth putting in an error
// message: from its first "error: " on, or else the end, at most about 1
// KiB, on one line.
func errorExcerpt(stderr string) string {
	s := stderr
	if i := strings.Index(s, "error: "); i >= 0 {
		s = s[i:]
	} else if len(s) > 1024 {
		s = s[len(s)-1024:]
	}
	return clip(oneLine(s))
}

// oneLine joins the non-empty lines of s with spaces.
func oneLine(s string) string {
	var lines []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, " ")
}

// clip cuts s to about 1 KiB.
func clip(s string) string {
	const limit = 1024
	if len(s) <= limit {
		return s
	}
	s = s[:limit]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
