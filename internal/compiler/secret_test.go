package compiler_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

const secretValue = "PARAMSECRET-9e2d17"

// secretTree is the S5 repro: a custom runtime with a secret parameter whose
// apply command prints it through many template functions.
func secretTree(t *testing.T, cmd string) *config.Set {
	t.Helper()
	return writeTree(t, map[string]string{
		"runtime.pvn.yaml": `runtime:
  name: secrt
  custom:
    apply:
      taskConfig:
        program:
          cmd: ["sh", "-c", '` + cmd + `']
    parameters: [{name: token, secret: {}}]
`,
		"app.pvn.yaml": `application:
  name: sec
  releaseChannels:
    - {name: stg, runtimes: [{runtime: secrt}]}
`,
		"svc/web.pvn.yaml": `service:
  name: web
  application: sec
  customRuntime:
    parameterValues: [{name: token, secret: {rawSecret: "` + secretValue + `"}}]
`,
	})
}

// TestS5SecretParamNotPrintedByFormatting: no fmt verb and no template
// function prints a raw secret parameter: a function that gets one fails the
// compilation (B5) without quoting it, and the compile output (redacted, as
// the CLI and API print it) holds the value nowhere.
func TestS5SecretParamNotPrintedByFormatting(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{
		`{{printf "%#v" .Params.token}}`, `{{printf "%v %+v %s %q %x %X %10s %-3v" .Params.token .Params.token .Params.token .Params.token .Params.token .Params.token .Params.token .Params.token}}`,
		`{{print .Params.token}}`, `{{println .Params}}`, `{{html .Params.token}}`, `{{js .Params.token}}`, `{{urlquery .Params.token}}`,
		`{{printf "%#v" .}}`, `{{printf "%+v" .Params}}`, `{{.Params.token}}`, `{{index .Params "token"}}`, `{{.Params.token.GoString}}`,
	} {
		set := secretTree(t, "echo "+cmd)
		in, err := compiler.InputFor(set, config.ServiceKey{Application: "sec", Service: "web"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := compiler.Compile(in)
		if err != nil {
			if strings.Contains(err.Error(), secretValue) {
				t.Errorf("%s: the error quotes the raw secret: %v", cmd, err)
			}
			continue
		}
		tree, err := res.Redacted()
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), secretValue) {
			t.Fatalf("%s: compile output holds the raw secret:\n%s", cmd, out)
		}
		if !strings.Contains(string(out), compiler.SecretMarker("token")) {
			t.Errorf("%s: the command does not reference the secret parameter:\n%s", cmd, out)
		}
	}
}

// TestS5SecretFormatVerbs: the Secret type itself, through fmt and JSON.
func TestS5SecretFormatVerbs(t *testing.T) {
	t.Parallel()
	set := secretTree(t, "echo {{.Params.token}}")
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "sec", Service: "web"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	obj := res.ReleaseChannels[0].Objects[0].(*compiler.CustomRuntimeObject)
	sec := obj.ParameterValues["token"]
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10.3s", "%T %v"} {
		if got := sprintf(verb, sec); strings.Contains(got, secretValue) || strings.Contains(got, hexOf(secretValue)) {
			t.Errorf("%s printed the secret: %s", verb, got)
		}
	}
	if got := sprintf("%#v", obj.ParameterValues); strings.Contains(got, secretValue) {
		t.Errorf("%%#v of the object printed the secret in ParameterValues")
	}
	raw, err := json.Marshal(obj.ParameterValues)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secretValue) {
		t.Errorf("JSON of the parameter values holds the secret: %s", raw)
	}
}

// TestB5SecretParamCarriedForTheRuntime: the command references the secret
// parameter by a marker, and the compiled object carries the value for the
// runtime (as a rawSecret, redacted in printed output).
func TestB5SecretParamCarriedForTheRuntime(t *testing.T) {
	t.Parallel()
	set := secretTree(t, "deploy --token={{.Params.token}}")
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "sec", Service: "web"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	obj := res.ReleaseChannels[0].Objects[0].(*compiler.CustomRuntimeObject)
	if got := obj.Custom.Apply.TaskConfig.Program.Cmd[2]; got != "deploy --token="+compiler.SecretMarker("token") {
		t.Errorf("command is %q", got)
	}
	if got := obj.Secrets["token"].RawSecret; got != secretValue {
		t.Errorf("the object carries %q for the runtime, want the secret", got)
	}
}

// TestB5SecretParamInTerraformRunnerRefused: a terraform runner cannot put a
// raw secret parameter's value in its templates (only a custom runtime
// replaces the marker), so a secret parameter value for it is a compile
// error naming the file and field, not a command that gets "(secret)".
func TestB5SecretParamInTerraformRunnerRefused(t *testing.T) {
	t.Parallel()
	for name, pv := range map[string]string{
		"undefined": `{name: token, secret: {rawSecret: "` + secretValue + `"}}`,
		"path":      `{name: path, secret: {rawSecret: "` + secretValue + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			set := writeTree(t, map[string]string{
				"runtime.pvn.yaml": "runtime:\n  name: tf\n  terraformRunner:\n    env:\n      TOKEN: {value: \"{{.Params.path}}\"}\n",
				"app.pvn.yaml":     "application:\n  name: a\n  releaseChannels:\n    - {name: stg, runtimes: [{runtime: tf}]}\n",
				"svc/s.pvn.yaml": "service:\n  name: s\n  application: a\n  customRuntime:\n    parameterValues:\n" +
					"      - {name: extraInitArgs, string: x}\n      - " + pv + "\n",
			})
			errs := compiler.ValidateSet(set)
			if len(errs) == 0 {
				t.Fatal("validate accepted a secret parameter for a terraform runner")
			}
			msg := errs.Err().Error()
			want := "s.pvn.yaml:7:"
			if !strings.Contains(msg, want) || !strings.Contains(msg, "service.customRuntime.parameterValues[1].secret") ||
				!strings.Contains(msg, "secret parameters cannot be used in terraformRunner templates; pass the secret through env") {
				t.Errorf("error does not refuse the secret at %s:\n%s", want, msg)
			}
			if strings.Contains(msg, secretValue) {
				t.Errorf("error quotes the secret:\n%s", msg)
			}
		})
	}
}
