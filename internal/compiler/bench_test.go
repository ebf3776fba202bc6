package compiler_test

import (
	"fmt"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

const benchDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: svc
  labels: {tier: "{{.Constants.tier}}"}
spec:
  replicas: 2
  selector: {matchLabels: {app: svc}}
  template:
    metadata: {labels: {app: svc}}
    spec:
      containers:
        - name: svc
          image: "{{.Params.image}}"
          env:
            - {name: RC, value: "{{.Builtins.ReleaseChannel.Name}}"}
            - {name: REGION, value: "{{.Builtins.Runtime.Labels.region}}"}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  selector: {app: svc}
  ports: [{port: 80}]
`

// benchInputs builds services × channels: each channel on its own fake runtime,
// each service a Deployment and a Service with an image parameter and a patch.
func benchInputs(services, channels int) []compiler.Input {
	runtimes := map[string]*config.Runtime{}
	app := &config.Application{Name: "bench"}
	for i := range channels {
		name := fmt.Sprintf("rc-%d", i)
		runtimes[name] = &config.Runtime{Name: name, Fake: &config.FakeRuntime{}, Labels: []config.Label{{Label: "region", Value: fmt.Sprintf("region-%d", i)}}}
		rc := config.ReleaseChannel{Name: name, Runtimes: []config.RuntimeConnection{{Runtime: name}},
			Constants: []config.Constant{{Name: "tier", String: &config.StringConstant{Value: "t"}}}}
		if i > 0 {
			rc.Preconditions = []config.Precondition{{ReleaseChannelStable: &config.ReleaseChannelStable{ReleaseChannel: fmt.Sprintf("rc-%d", i-1)}}}
		}
		app.ReleaseChannels = append(app.ReleaseChannels, rc)
	}
	replicas := "{{.Params.replicas}}"
	inputs := make([]compiler.Input, services)
	for s := range services {
		svc := &config.Service{
			Name:        fmt.Sprintf("svc-%d", s),
			Application: "bench",
			ServiceBackend: config.ServiceBackend{KubernetesConfig: &config.KubernetesConfig{
				Type:    config.KubernetesTypeKubernetes,
				Inlined: benchDeployment,
				Patches: []config.KubernetesPatch{{Target: &config.PatchTarget{Kind: "Deployment"}, Replace: &config.PatchReplace{Path: "/spec/replicas", IntAsString: &replicas}}},
			}},
			Parameters: []config.ParameterDefinition{
				{Name: "image", Required: true, DockerImage: &config.DockerImageParameter{ImageRegistryInfo: &config.ImageRegistryInfo{ContainerRegistry: "ghcr.io", ImageRepository: "acme/svc"}}},
				{Name: "replicas", Int: &config.IntParameter{}},
			},
		}
		inputs[s] = compiler.Input{
			Application: app, Runtimes: runtimes, Service: svc,
			Params: []compiler.ParamValue{{Name: "image", Value: fmt.Sprintf("1.%d", s)}, {Name: "replicas", Value: "3"}},
		}
	}
	return inputs
}

// BenchmarkCompile1000x10 compiles 1,000 services for 10 release channels
// each (10,000 compiled configs) per iteration.
func BenchmarkCompile1000x10(b *testing.B) {
	inputs := benchInputs(1000, 10)
	b.ReportAllocs()
	for b.Loop() {
		for _, in := range inputs {
			if _, err := compiler.Compile(in); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCompileOne compiles a single service for 10 release channels.
func BenchmarkCompileOne(b *testing.B) {
	in := benchInputs(1, 10)[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compiler.Compile(in); err != nil {
			b.Fatal(err)
		}
	}
}
