package builtin

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// A fake runtime's protection commands run on this host.
func TestFakeRunsChecks(t *testing.T) {
	t.Parallel()
	rt, err := Registry().New("fake", &config.Runtime{Name: "sim", Fake: &config.FakeRuntime{}}, runtimes.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.(runtimes.Closer).Close() })
	cr, ok := rt.(runtimes.CheckRunner)
	if !ok {
		t.Fatal("a fake runtime is no CheckRunner")
	}
	tg := runtimes.Target{InstanceKey: runtimes.InstanceKey{Application: "app", Service: "web", ReleaseChannel: "prod"}, Version: "v1"}
	spec := json.RawMessage(`{"protection":"p","taskConfig":{"program":{"cmd":["sh","-c","echo checked $PVN_RELEASE_CHANNEL; exit 4"]}}}`)
	out, err := cr.RunCheck(context.Background(), tg, runtimes.CheckCommand{Name: "p", Spec: spec})
	if err != nil || out.Passed || out.Message != "exit code 4: checked prod" {
		t.Fatalf("RunCheck: %+v, %v", out, err)
	}
}

// Every runtime kind has both halves: its facts (config.RuntimeKinds, which
// the compiler and the server read) and its factory (Registry).
func TestEveryKindHasFactsAndFactory(t *testing.T) {
	t.Parallel()
	reg := Registry()
	for _, k := range config.RuntimeKinds() {
		if reg[k.Name] == nil {
			t.Errorf("runtime kind %s has no factory in builtin.Registry", k.Name)
		}
	}
	for name := range reg {
		if _, ok := config.LookupRuntimeKind(name); !ok {
			t.Errorf("factory %s has no runtime kind (config.RegisterRuntimeKind)", name)
		}
	}
	// The ECS kind's grace for agent-served runtimes is the runtime's own.
	if k, _ := config.LookupRuntimeKind(ecsspec.Kind); k.ConvergenceGrace != ecsspec.ConvergenceGrace {
		t.Errorf("awsEcs grace %v, the ECS runtime's %v", k.ConvergenceGrace, ecsspec.ConvergenceGrace)
	}
}
