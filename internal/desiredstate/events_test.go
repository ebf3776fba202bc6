package desiredstate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// EventTypes lists every EventType constant of events.go, once.
func TestEventTypesListsEveryConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "EventType" {
				for _, n := range v.Names {
					consts = append(consts, n.Name)
				}
			}
		}
	}
	listed := EventTypes()
	if len(listed) != len(consts) {
		t.Errorf("EventTypes lists %d types, events.go declares %d: %v", len(listed), len(consts), consts)
	}
	seen := map[EventType]bool{}
	for _, e := range listed {
		if seen[e] {
			t.Errorf("EventTypes lists %q twice", e)
		}
		seen[e] = true
	}
	if !slices.Contains(listed, EventLeftoverEnded) || !slices.Contains(listed, EventConfigured) {
		t.Errorf("EventTypes = %v", listed)
	}
}
