// Package gates is the contract between the engine and the kinds of gate it
// does not evaluate itself: a check whose own spec (desiredstate.Gate) an
// evaluator registered for its kind decides when the check runs (an alert
// gate asks an Alertmanager, commitDenylist ranges read a repository).
//
// The engine evaluates builtins (from the time alone) and runs commands
// through the channel's runtime; every other kind is an Evaluator here. The
// composition root (internal/daemon) registers one per kind in a Registry
// and gives it to the engine (which runs checks) and the server (which
// describes them in previews). A new gate kind is then its config field,
// its compile hook, its evaluator package and one registration line.
//
// This package is a leaf: evaluator packages implement it without importing
// the engine.
package gates

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// Evaluator decides the checks of one gate kind.
type Evaluator interface {
	// Evaluate runs the check once, for the channel named by target, from
	// its spec (the kind's own JSON): Passed with a message for people,
	// or an error when it could not decide (the check then stays pending,
	// never passed). It must be safe for concurrent use.
	Evaluate(ctx context.Context, target Target, spec json.RawMessage) (Outcome, error)
	// Describe says what the check asks, for people, in a preview of a
	// push: "asks http://am:9093 for alerts matching severity=\"sev1\"".
	// It holds no secret (no credentials of a URL).
	Describe(spec json.RawMessage) string
}

// Target names what a check runs for.
type Target struct {
	Application, Service, ReleaseChannel string
	// DesiredStateID and Version are the desired state the channel
	// converges to and its version.
	DesiredStateID, Version string
}

// Outcome is what one evaluation decided.
type Outcome struct {
	Passed  bool
	Message string
}

// ErrUnknownKind is wrapped by Evaluate for a gate whose kind nothing
// registered.
var ErrUnknownKind = errors.New("no evaluator for this gate kind")

// Registry holds the evaluators by gate kind. The zero value is empty and
// ready to use; a nil *Registry is empty.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Evaluator
}

// Register adds the evaluator of kind. kind is the gate's member in a
// stored check ("alert"): it must be a name no check field takes, and
// registered once.
func (r *Registry) Register(kind string, e Evaluator) error {
	if e == nil {
		return fmt.Errorf("gate kind %q: nil evaluator", kind)
	}
	if err := ds.ValidGateKind(kind); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[kind]; ok {
		return fmt.Errorf("gate kind %q registered twice", kind)
	}
	if r.m == nil {
		r.m = map[string]Evaluator{}
	}
	r.m[kind] = e
	return nil
}

// Lookup returns the evaluator of kind.
func (r *Registry) Lookup(kind string) (Evaluator, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.m[kind]
	return e, ok
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Evaluate runs g through the evaluator of its kind.
func (r *Registry) Evaluate(ctx context.Context, target Target, g ds.Gate) (Outcome, error) {
	e, ok := r.Lookup(g.Kind)
	if !ok {
		known := "none"
		if k := r.Kinds(); len(k) > 0 {
			known = strings.Join(k, ", ")
		}
		return Outcome{}, fmt.Errorf("gate %q (this drover evaluates: %s): %w", g.Kind, known, ErrUnknownKind)
	}
	return e.Evaluate(ctx, target, g.Spec)
}

// Describe says what g asks, for people ("asks its <kind> gate" for a kind
// nothing registered, or whose evaluator says nothing).
func (r *Registry) Describe(g ds.Gate) string {
	if e, ok := r.Lookup(g.Kind); ok {
		if d := e.Describe(g.Spec); d != "" {
			return d
		}
	}
	return "asks its " + g.Kind + " gate"
}

// Decode reads a gate's spec into v, strictly: a spec with a member v does
// not know is refused, naming it, so a misspelt field is not ignored.
func Decode(spec json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode gate spec: %w", err)
	}
	return nil
}
