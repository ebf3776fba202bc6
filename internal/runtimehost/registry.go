package runtimehost

import (
	"fmt"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// Factory builds a runtime from its config. It lives here, not in package
// runtimes, so that the runtime interfaces (which the engine imports) need
// no config package.
type Factory func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error)

// Registry maps runtime kinds ("fake", "kubernetes", "custom",
// "terraformRunner") to factories.
type Registry map[string]Factory

// New builds the runtime for cfg, whose kind is given by kind.
func (r Registry) New(kind string, cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	f, ok := r[kind]
	if !ok {
		return nil, fmt.Errorf("runtime %s: %s runtimes are not supported yet", cfg.Name, kind)
	}
	return f(cfg, opts)
}
