package gates_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/gates"
)

// yes passes every check, naming its spec.
type yes struct{}

func (yes) Evaluate(_ context.Context, _ gates.Target, spec json.RawMessage) (gates.Outcome, error) {
	return gates.Outcome{Passed: true, Message: string(spec)}, nil
}

func (yes) Describe(json.RawMessage) string { return "" }

// TestRegistry: a kind registers once and under a name no check field
// takes; a gate runs through its kind's evaluator; one of a kind nothing
// registered cannot run, naming the kinds there are.
func TestRegistry(t *testing.T) {
	t.Parallel()
	var reg gates.Registry
	if err := reg.Register("toy", yes{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("toy", yes{}); err == nil {
		t.Error("registered twice")
	}
	if err := reg.Register("lifecycle", yes{}); err == nil {
		t.Error("registered a check field's name")
	}
	if err := reg.Register("other", nil); err == nil {
		t.Error("registered nil")
	}
	out, err := reg.Evaluate(t.Context(), gates.Target{}, ds.Gate{Kind: "toy", Spec: json.RawMessage(`{"a":1}`)})
	if err != nil || !out.Passed || out.Message != `{"a":1}` {
		t.Fatalf("evaluate: %+v, %v", out, err)
	}
	_, err = reg.Evaluate(t.Context(), gates.Target{}, ds.Gate{Kind: "nope"})
	if !errors.Is(err, gates.ErrUnknownKind) || !strings.Contains(err.Error(), `gate "nope" (this drover evaluates: toy)`) {
		t.Fatalf("unknown kind: %v", err)
	}
	var none *gates.Registry
	if _, err := none.Evaluate(t.Context(), gates.Target{}, ds.Gate{Kind: "toy"}); !errors.Is(err, gates.ErrUnknownKind) {
		t.Fatalf("nil registry: %v", err)
	}
	if got := reg.Describe(ds.Gate{Kind: "toy"}); got != "asks its toy gate" {
		t.Errorf("describe without words: %q", got)
	}
}

// TestDecodeIsStrict: a spec member the kind does not know is refused.
func TestDecodeIsStrict(t *testing.T) {
	t.Parallel()
	var v struct {
		URL string `json:"url"`
	}
	if err := gates.Decode(json.RawMessage(`{"url":"x"}`), &v); err != nil || v.URL != "x" {
		t.Fatalf("decode: %v %+v", err, v)
	}
	if err := gates.Decode(json.RawMessage(`{"ulr":"x"}`), &v); err == nil || !strings.Contains(err.Error(), "ulr") {
		t.Fatalf("misspelt member: %v", err)
	}
}
