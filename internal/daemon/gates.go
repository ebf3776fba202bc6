package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/drover-dev/drover/internal/alerts"
	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/gitcheck"
)

// gateKinds are the gate kinds this drover evaluates, by the member that
// names each in a stored check: one line per kind. The engine runs their
// checks; the server describes them in previews.
func gateKinds(dataDir string) *gates.Registry {
	reg := &gates.Registry{}
	for kind, e := range map[string]gates.Evaluator{
		alerts.Kind:   &alerts.Client{},
		gitcheck.Kind: &gitcheck.Checker{Dir: filepath.Join(dataDir, "git")},
	} {
		if err := reg.Register(kind, e); err != nil {
			// The table above is wrong (TestGateKinds says so first).
			panic(fmt.Sprintf("gate kinds: %v", err))
		}
	}
	return reg
}
