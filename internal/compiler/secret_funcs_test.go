package compiler_test

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

// secretTreeWithMsg is secretTree with a second, plain string parameter
// (msg) whose value the service sets.
func secretTreeWithMsg(t *testing.T, cmd, msg string) *config.Set {
	t.Helper()
	return writeTree(t, map[string]string{
		"runtime.pvn.yaml": `runtime:
  name: secrt
  custom:
    apply:
      taskConfig:
        program:
          cmd: ["sh", "-c", '` + cmd + `']
    parameters: [{name: token, secret: {}}, {name: msg, string: {}}]
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
    parameterValues:
      - {name: token, secret: {rawSecret: "` + secretValue + `"}}
      - {name: msg, string: "` + msg + `"}
`,
	})
}

// TestB5SecretParamThroughFunctionRefused: a template function that gets a
// custom runtime's secret parameter (directly, piped, through a variable, or
// inside a string that printf or a method made of it) would work on the
// marker, not on the value; the compilation fails, naming the parameter, the
// function and the runtime file, instead of giving the command a wrong value.
func TestB5SecretParamThroughFunctionRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ fn, cmd string }{
		{"printf", `{{printf "%x" .Params.token}}`},
		{"printf", `{{printf "%s" .Params.token}}`},
		{"printf", `{{.Params.token | printf "%s"}}`},
		{"printf", `{{printf "%v" .Params}}`},
		{"printf", `{{printf "%+v" .}}`},
		{"print", `{{print .Params.token}}`},
		{"println", `{{println .Params}}`},
		{"html", `{{html .Params.token}}`},
		{"js", `{{js .Params.token}}`},
		{"js", `{{index .Params "token" | js}}`},
		{"urlquery", `{{urlquery .Params.token}}`},
		{"urlquery", `{{urlquery .Params.token.String}}`},
		{"slice", `{{slice .Params.token.String 1}}`},
		{"printf", `{{slice (printf "%s" .Params.token) 1}}`},
		{"index", `{{index .Params.token 0}}`},
		{"index", `{{index .Params.token.String 0}}`},
		{"len", `{{len .Params.token}}`},
		{"len", `{{len .Params.token.GoString}}`},
		{"eq", `{{if eq .Params.token.String "x"}}y{{end}}`},
		{"ne", `{{ne "x" .Params.token.String}}`},
		{"lt", `{{lt .Params.token.String "x"}}`},
		{"le", `{{le .Params.token.String "x"}}`},
		{"gt", `{{gt .Params.token.String "x"}}`},
		{"ge", `{{ge .Params.token.String "x"}}`},
		{"and", `{{and .Params.token "x"}}`},
		{"or", `{{or .Params.token "x"}}`},
		{"not", `{{not .Params.token}}`},
		{"call", `{{call .Params.token}}`},
		{"html", `{{$t := .Params.token}}{{html $t}}`},
		{"urlquery", `{{with .Params.token}}{{urlquery .}}{{end}}`},
		{"js", `{{range $i, $e := list}}{{end}}{{js .Params.token}}`},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			cmd := strings.ReplaceAll(tc.cmd, "{{range $i, $e := list}}{{end}}", "{{range $i, $e := .Constants}}{{end}}")
			set := secretTreeWithMsg(t, "deploy "+cmd, "hello")
			errs := compiler.ValidateSet(set)
			if len(errs) == 0 {
				t.Fatal("a secret parameter passed to a function was accepted")
			}
			msg := errs.Err().Error()
			want := `secret parameter "token" cannot be passed to ` + tc.fn + `: secrets are substituted by the runtime only where the template outputs {{.Params.token}} as is`
			if !strings.Contains(msg, want) || !strings.Contains(msg, "runtime.pvn.yaml:") {
				t.Errorf("error is not %q at runtime.pvn.yaml:\n%s", want, msg)
			}
			if strings.Contains(msg, secretValue) {
				t.Errorf("error quotes the secret:\n%s", msg)
			}
		})
	}
}

// TestB5SecretParamOutputWholeAccepted: outputting the secret as a whole,
// also through a variable, {{with}} or index, is what a template may do; the
// command gets the marker, which the runtime replaces.
func TestB5SecretParamOutputWholeAccepted(t *testing.T) {
	t.Parallel()
	m := compiler.SecretMarker("token")
	for cmd, want := range map[string]string{
		`{{.Params.token}}`:                            m,
		`{{$t := .Params.token}}{{$t}}`:                m,
		`{{with .Params.token}}{{.}}{{end}}`:           m,
		`{{index .Params "token"}}`:                    m,
		`{{.Params.token.String}}`:                     m,
		`{{printf "%s-%d" .Params.msg (len .Params)}}`: "hello-2",
		`{{if eq .Params.msg "hello"}}yes{{end}}`:      "yes",
		`{{.Params.msg | printf "%s" | urlquery}}`:     "hello",
		`{{.Params.token}}{{.Params.token}}`:           m + m,
	} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			set := secretTreeWithMsg(t, "deploy "+cmd, "hello")
			in, err := compiler.InputFor(set, config.ServiceKey{Application: "sec", Service: "web"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := compiler.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			obj := res.ReleaseChannels[0].Objects[0].(*compiler.CustomRuntimeObject)
			if got := obj.Custom.Apply.TaskConfig.Program.Cmd[2]; got != "deploy "+want {
				t.Errorf("command is %q, want %q", got, "deploy "+want)
			}
		})
	}
}

// TestB5SecretMarkerWrittenLiterallyRefused: the runtime replaces every
// marker of a secret parameter in its commands, so a marker that does not
// come from the secret itself (written in the command, or in another
// parameter's value, or made by joining two values) would get the secret
// too; it is refused.
func TestB5SecretMarkerWrittenLiterallyRefused(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ cmd, msg string }{
		"literal":   {"deploy (secret:token)", "hello"},
		"parameter": {"deploy {{.Params.msg}}", "(secret:token)"},
		"joined":    {`deploy {{.Params.msg}}{{"token)"}}`, "(secret:"},
		"printf":    {`deploy {{printf "%s" .Params.msg}}`, "(secret:token)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			set := secretTreeWithMsg(t, tc.cmd, tc.msg)
			errs := compiler.ValidateSet(set)
			if len(errs) == 0 {
				t.Fatal("a marker not made by the secret was accepted")
			}
			msg := errs.Err().Error()
			if want := `the text "(secret:token)" is reserved: the runtime replaces it with the value of secret parameter "token"`; !strings.Contains(msg, want) {
				t.Errorf("error does not say %q:\n%s", want, msg)
			}
		})
	}
}

// TestSecretReferenceUsableByFunctionsElsewhere: outside custom runtime
// commands a secret parameter renders as a reference ("secret://KEY@VERSION",
// "(secret)"), never its value, and functions keep working on that reference
// as they did (Prodvana configs may quote or test it); only custom runtime
// commands, where the runtime substitutes the value, refuse functions (B5).
func TestSecretReferenceUsableByFunctionsElsewhere(t *testing.T) {
	t.Parallel()
	set := writeTree(t, map[string]string{
		"runtime.pvn.yaml": limitsRuntime,
		"app.pvn.yaml":     limitsApp,
		"svc/s.pvn.yaml": `service:
  name: s
  application: a
  parameters: [{name: pw, required: true, secret: {}}]
  kubernetesConfig:
    type: KUBERNETES
    local: {path: .}
`,
		"svc/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  pw: '{{printf \"%s\" .Params.pw | urlquery}}'\n  set: '{{if .Params.pw}}yes{{end}}'\n",
	})
	if errs := compiler.ValidateSet(set); len(errs) != 0 {
		t.Fatalf("functions on a secret reference in a Kubernetes manifest were refused:\n%v", errs.Err())
	}
}
