package compiler_test

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

// TestB18LongParamNotEchoed: a 60 MB parameter value (the report's push)
// gives short errors, in every release channel, whichever way it is wrong.
func TestB18LongParamNotEchoed(t *testing.T) {
	t.Parallel()
	set := writeTree(t, map[string]string{
		"runtime.pvn.yaml": limitsRuntime,
		"app.pvn.yaml":     limitsApp,
		"svc/s.pvn.yaml": `service:
  name: s
  application: a
  kubernetesConfig: {type: KUBERNETES, inlined: "kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n"}
  parameters:
    - {name: image, dockerImage: {imageRegistryInfo: {imageRepository: x/y}}}
    - {name: n, int: {}}
`,
	})
	huge := strings.Repeat("x", 60<<20)
	for name, params := range map[string][]compiler.ParamValue{
		"image":           {{Name: "image", Value: huge}},
		"image-with-tag":  {{Name: "image", Value: "repo:" + huge}},
		"int":             {{Name: "image", Value: "1.0"}, {Name: "n", Value: huge}},
		"unknown-name":    {{Name: huge, Value: "1"}},
		"unknown-channel": {{Name: "image", Value: "1.0"}, {Name: "image", Value: "1.0", ReleaseChannel: huge}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in, err := compiler.InputFor(set, config.ServiceKey{Application: "a", Service: "s"})
			if err != nil {
				t.Fatal(err)
			}
			in.Params = params
			_, err = compiler.Compile(in)
			if err == nil {
				t.Fatal("want an error")
			}
			if n := len(err.Error()); n > 8192 {
				t.Errorf("error of %d bytes: %.300s...", n, err)
			}
		})
	}
}
