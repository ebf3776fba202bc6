package gitcheck_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/gitcheck"
)

// TestGateEvaluator: commitDenylist ranges fail for a pushed commit in a
// range (of its parameter's repository when the denylist names none) and
// pass otherwise, naming the commits looked at.
func TestGateEvaluator(t *testing.T) {
	t.Parallel()
	dir, c := repo(t, 4)
	chk := &gitcheck.Checker{Dir: t.TempDir()}
	spec := func(commit string) json.RawMessage {
		b, err := json.Marshal(gitcheck.Ranges{Pushed: []gitcheck.PushedCommit{{Param: "commit", Commit: commit, Repository: dir}},
			Ranges: []gitcheck.Range{{Start: c[0], End: c[2]}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out, err := chk.Evaluate(t.Context(), gates.Target{}, spec(c[1]))
	if err != nil || out.Passed || !strings.Contains(out.Message, "commit "+c[1]+" (parameter commit) is in the denylisted range") {
		t.Fatalf("in a range: %+v, %v", out, err)
	}
	out, err = chk.Evaluate(t.Context(), gates.Target{}, spec(c[3]))
	if err != nil || !out.Passed || out.Message != "no commit in a denylisted range (commit="+c[3]+")" {
		t.Fatalf("after it: %+v, %v", out, err)
	}
	if got := chk.Describe(spec(c[3])); got != "looks for commit="+c[3]+" in the denylisted ranges "+c[0]+".."+c[2] {
		t.Errorf("describe: %q", got)
	}
}
