package compiler_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/ecsspec"
)

// compileECS compiles one service of the tree under dir.
func compileECS(t *testing.T, dir, app, svc string, params ...string) *compiler.Result {
	t.Helper()
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		t.Fatal(errs.Err())
	}
	if errs := set.Validate(); len(errs) > 0 {
		t.Fatal(errs.Err())
	}
	in, err := compiler.InputFor(set, config.ServiceKey{Application: app, Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range params {
		pv, err := compiler.ParseParam(p)
		if err != nil {
			t.Fatal(err)
		}
		in.Params = append(in.Params, pv)
	}
	res, err := compiler.Compile(in)
	if err != nil {
		var cerrs compiler.Errors
		if errors.As(err, &cerrs) {
			t.Fatal(compiler.Locate(set, cerrs).Err())
		}
		t.Fatal(err)
	}
	return res
}

func ecsObject(t *testing.T, ch *compiler.CompiledReleaseChannel) ecsspec.Object {
	t.Helper()
	if ch.Backend != ecsspec.Kind || len(ch.Objects) != 1 {
		t.Fatalf("%s: backend %q with %d objects", ch.Name, ch.Backend, len(ch.Objects))
	}
	raw, err := json.Marshal(ch.Objects[0])
	if err != nil {
		t.Fatal(err)
	}
	var o ecsspec.Object
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// Prodvana's public ECS examples compile unchanged; the three ways its
// ecs-multi-clusters example varies a service per release channel (a
// templated subPath, perReleaseChannel files, constants in the JSON) give
// the same task and service definitions in each channel.
func TestProdvanaECSExamples(t *testing.T) {
	t.Parallel()
	const dir = "testdata/prodvana-ecs"
	byChannel := map[string][]ecsspec.Object{}
	for _, svc := range []string{"nginx-diff-files-predictable", "nginx-diff-files", "nginx-templating"} {
		res := compileECS(t, dir, "ecs-multi-clusters", svc, "image=1.27")
		if len(res.ReleaseChannels) != 2 {
			t.Fatalf("%s: %d channels", svc, len(res.ReleaseChannels))
		}
		for _, ch := range res.ReleaseChannels {
			o := ecsObject(t, ch)
			if o.ServiceName != svc || o.Runtime == "" {
				t.Errorf("%s in %s: %+v", svc, ch.Name, o)
			}
			byChannel[ch.Name] = append(byChannel[ch.Name], o)
		}
	}
	for rc, objs := range byChannel {
		for _, o := range objs[1:] {
			// The injected PVN_* variables name each service; the rest is the same.
			if withoutEnv(t, o.TaskDefinition) != withoutEnv(t, objs[0].TaskDefinition) || string(o.ServiceDefinition) != string(objs[0].ServiceDefinition) {
				t.Errorf("%s: the three services differ:\n%s\n%s\n%s\n%s", rc, objs[0].TaskDefinition, objs[0].ServiceDefinition, o.TaskDefinition, o.ServiceDefinition)
			}
		}
	}
	staging, prod := byChannel["staging"][0], byChannel["production"][0]
	if !strings.Contains(string(staging.ServiceDefinition), `"subnets":["subnet-123456"]`) || !strings.Contains(string(prod.ServiceDefinition), `"securityGroups":["sg-654321"]`) {
		t.Errorf("per-channel networks:\n%s\n%s", staging.ServiceDefinition, prod.ServiceDefinition)
	}
	if !strings.Contains(string(staging.TaskDefinition), `"image":"docker.io/library/nginx:1.27"`) {
		t.Errorf("the image parameter in the task definition: %s", staging.TaskDefinition)
	}
	for _, c := range []struct{ app, svc string }{{"ecs-with-analysis", "nginx"}, {"ecs-with-protections", "nginx"}} {
		res := compileECS(t, dir, c.app, c.svc, "image=1.27")
		for _, ch := range res.ReleaseChannels {
			o := ecsObject(t, ch)
			if c.app == "ecs-with-analysis" && o.ServiceName != "nginx-"+ch.Name {
				t.Errorf("%s in %s: ecsServiceNameOverride gave %q", c.app, ch.Name, o.ServiceName)
			}
		}
	}
}

// withoutEnv is a task definition without its containers' environment.
func withoutEnv(t *testing.T, task []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(task, &m); err != nil {
		t.Fatal(err)
	}
	defs, _ := m["containerDefinitions"].([]any)
	for _, c := range defs {
		delete(c.(map[string]any), "environment")
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
