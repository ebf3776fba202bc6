package compiler_test

import (
	"fmt"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

// TestChannelsRenderingAlikeGetTheirOwnObjects: release channels whose
// manifests render to the same text share its decoding, yet each patches
// and keeps objects of its own.
func TestChannelsRenderingAlikeGetTheirOwnObjects(t *testing.T) {
	t.Parallel()
	runtimes := map[string]*config.Runtime{}
	app := &config.Application{Name: "app"}
	for i := range 4 {
		name := fmt.Sprintf("rc-%d", i)
		runtimes[name] = &config.Runtime{Name: name, Fake: &config.FakeRuntime{}}
		app.ReleaseChannels = append(app.ReleaseChannels, config.ReleaseChannel{Name: name,
			Runtimes:  []config.RuntimeConnection{{Runtime: name}},
			Constants: []config.Constant{{Name: "replicas", String: &config.StringConstant{Value: fmt.Sprint(i + 1)}}}})
	}
	replicas := "{{.Constants.replicas}}"
	svc := &config.Service{Name: "svc", Application: "app", ServiceBackend: config.ServiceBackend{KubernetesConfig: &config.KubernetesConfig{
		Type:    config.KubernetesTypeKubernetes,
		Inlined: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: svc}\nspec:\n  replicas: 9\n  template: {spec: {containers: [{name: c, image: nginx}]}}\n",
		Patches: []config.KubernetesPatch{{Target: &config.PatchTarget{Kind: "Deployment"}, Replace: &config.PatchReplace{Path: "/spec/replicas", IntAsString: &replicas}}},
	}}}
	for range 20 { // the channels compile in parallel: give a shared object a chance to show
		res, err := compiler.Compile(compiler.Input{Application: app, Runtimes: runtimes, Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		var seen []map[string]any
		for i, rc := range res.ReleaseChannels {
			obj := rc.Objects[0].(map[string]any)
			spec := obj["spec"].(map[string]any)
			if fmt.Sprint(spec["replicas"]) != fmt.Sprint(i+1) {
				t.Fatalf("%s: replicas %v, want %d", rc.Name, spec["replicas"], i+1)
			}
			containers := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
			containers[0].(map[string]any)["image"] = rc.Name // must change this channel's object only
			seen = append(seen, obj)
		}
		for i, obj := range seen {
			image := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
			if image != res.ReleaseChannels[i].Name {
				t.Fatalf("%s: a change to another channel's object reached it (image %v)", res.ReleaseChannels[i].Name, image)
			}
		}
	}
}
