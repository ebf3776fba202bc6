package gitcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/gitcheck/commitspec"
)

// Kind is the gate kind of commit ranges (commitspec.Kind).
const Kind = commitspec.Kind

// Ranges, PushedCommit and Range are the spec of a commitDenylist's ranges
// (package commitspec).
type (
	Ranges       = commitspec.Ranges
	PushedCommit = commitspec.PushedCommit
	Range        = commitspec.Range
)

var _ gates.Evaluator = (*Checker)(nil)

// Evaluate decides a commitDenylist's ranges (gates.Evaluator): it fails
// when a pushed commit lies in one.
func (c *Checker) Evaluate(ctx context.Context, _ gates.Target, raw json.RawMessage) (gates.Outcome, error) {
	var spec Ranges
	if err := gates.Decode(raw, &spec); err != nil {
		return gates.Outcome{}, err
	}
	var seen []string
	for _, pc := range spec.Pushed {
		repo := spec.Repository
		if repo == "" {
			repo = pc.Repository
		}
		for _, r := range spec.Ranges {
			in, err := c.InRange(ctx, repo, pc.Commit, r.Start, r.End)
			if err != nil {
				return gates.Outcome{}, fmt.Errorf("%s: %w", repo, err)
			}
			if in {
				return gates.Outcome{Message: fmt.Sprintf("commit %s (parameter %s) is in the denylisted range %s..%s of %s", pc.Commit, pc.Param, r.Start, r.End, repo)}, nil
			}
		}
		seen = append(seen, pc.Param+"="+pc.Commit)
	}
	return gates.Outcome{Passed: true, Message: "no commit in a denylisted range (" + strings.Join(seen, ", ") + ")"}, nil
}

// Describe says which commits are looked for in which ranges
// (gates.Evaluator).
func (c *Checker) Describe(raw json.RawMessage) string {
	var spec Ranges
	if gates.Decode(raw, &spec) != nil {
		return ""
	}
	var commits, ranges []string
	for _, pc := range spec.Pushed {
		commits = append(commits, pc.Param+"="+pc.Commit)
	}
	for _, r := range spec.Ranges {
		ranges = append(ranges, r.Start+".."+r.End)
	}
	return fmt.Sprintf("looks for %s in the denylisted ranges %s", strings.Join(commits, ", "), strings.Join(ranges, ", "))
}
