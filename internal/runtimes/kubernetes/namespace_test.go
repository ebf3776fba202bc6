package kubernetes

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
)

// The compiler renders Helm charts into the managed namespace before the
// runtime creates it: both must name it the same way.
func TestManagedNamespaceMatchesCompiler(t *testing.T) {
	t.Parallel()
	for _, k := range []runtimes.InstanceKey{
		{Application: "shop", Service: "web", ReleaseChannel: "prod"},
		{Application: strings.Repeat("a", 40), Service: "web", ReleaseChannel: strings.Repeat("b", 40)},
	} {
		if got, want := managedNamespace(DefaultNamespacePrefix, k), desiredstate.ManagedNamespace(k.Application, k.ReleaseChannel); got != want {
			t.Errorf("%v: runtime %q, compiler %q", k, got, want)
		}
	}
}
