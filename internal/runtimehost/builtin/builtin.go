// Package builtin lists the runtime kinds built into drover. Only the
// composition root (and tests) import it, so that the server, the engine and
// the runtime host import no runtime backend.
package builtin

import (
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes/custom"
	"github.com/drover-dev/drover/internal/runtimes/fake"
	"github.com/drover-dev/drover/internal/runtimes/kubernetes"
	"github.com/drover-dev/drover/internal/runtimes/terraform"
)

// Registry returns the runtime kinds built into drover.
func Registry() runtimehost.Registry {
	return runtimehost.Registry{
		"fake":            fake.Factory,
		"custom":          custom.Factory,
		"terraformRunner": terraform.Factory,
		"kubernetes":      kubernetes.Factory,
	}
}
