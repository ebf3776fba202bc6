package compiler_test

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

// Extension dependencies that cannot be met are refused at compile time:
// an unknown name, one that runs later, a cycle, two extensions of a name.
func TestExtensionOrderRefused(t *testing.T) {
	t.Parallel()
	ext := func(name, lifecycle, deps string) string {
		s := "    - inlined: {name: " + name + ", taskConfig: {program: {cmd: [\"true\"]}}}\n      lifecycle: " + lifecycle + "\n"
		if deps != "" {
			s += "      dependencies: [" + deps + "]\n"
		}
		return s
	}
	for _, tt := range []struct{ exts, want string }{
		{ext("a", "PRE_APPROVAL", "{name: nosuch}"), `extension a depends on "nosuch", which release channel stg has no extension named`},
		{ext("a", "PRE_APPROVAL", "{name: b}") + ext("b", "POST_DEPLOYMENT", ""), "extension a (PRE_APPROVAL) depends on b, which runs later (POST_DEPLOYMENT)"},
		{ext("a", "DEPLOYMENT", "{name: b}") + ext("b", "DEPLOYMENT", "{name: a}"), "convergence extensions depend on each other in a cycle: a -> b -> a"},
		{ext("a", "DEPLOYMENT", "") + ext("a", "POST_DEPLOYMENT", ""), `two convergence extensions named "a" in release channel stg`},
	} {
		set := writeTree(t, map[string]string{
			"runtime.pvn.yaml": "runtime:\n  name: r\n  fake: {}\n",
			"app.pvn.yaml":     "application:\n  name: x\n  releaseChannels:\n    - {name: stg, runtimes: [{runtime: r}]}\n",
			"svc.pvn.yaml":     "service:\n  name: s\n  application: x\n  customRuntime: {}\n  convergenceExtensions:\n" + tt.exts,
		})
		in, err := compiler.InputFor(set, config.ServiceKey{Application: "x", Service: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compiler.Compile(in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("want an error saying %q, got %v", tt.want, err)
		}
	}
}
