package cli

import (
	"github.com/drover-dev/drover/internal/compiler"
)

// parseParams parses --param NAME=VALUE and --param-by-release-channel
// RC=NAME=VALUE values. A name given twice (twice for all release channels, or
// twice for the same one) is a usage error: which value was meant is unclear.
func parseParams(params, rcParams []string) ([]compiler.ParamValue, error) {
	out := make([]compiler.ParamValue, 0, len(params)+len(rcParams))
	type key struct{ rc, name string }
	seen := map[key]bool{}
	add := func(flag string, pv compiler.ParamValue) error {
		k := key{pv.ReleaseChannel, pv.Name}
		if seen[k] {
			if pv.ReleaseChannel != "" {
				return usageErrorf("%s: parameter %q is given more than once for release channel %q: give each value once", flag, pv.Name, pv.ReleaseChannel)
			}
			return usageErrorf("%s: parameter %q is given more than once: give each value once", flag, pv.Name)
		}
		seen[k] = true
		out = append(out, pv)
		return nil
	}
	for _, p := range params {
		pv, err := compiler.ParseParam(p)
		if err != nil {
			return nil, usageError(err)
		}
		if err := add("--param", pv); err != nil {
			return nil, err
		}
	}
	for _, p := range rcParams {
		pv, err := compiler.ParseReleaseChannelParam(p)
		if err != nil {
			return nil, usageError(err)
		}
		if err := add("--param-by-release-channel", pv); err != nil {
			return nil, err
		}
	}
	return out, nil
}
