package compiler

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

// fuzzSecret is a raw secret parameter value no template may print (S5).
const fuzzSecret = "FUZZSECRET-3b7c"

// FuzzRender feeds arbitrary template text through the renderer and the error
// formatter: neither may panic, and a successful render of text without "{{"
// returns it unchanged; no template prints a raw secret or more than the
// output limit, and every template ends (see the limits in template_limits.go).
func FuzzRender(f *testing.F) {
	for _, seed := range []string{
		"image: {{.Params.image}}",
		"{{.Params.image.Tag}}-{{.Builtins.Runtime.Labels.region}}",
		"{{.Constants.missing}}",
		"{{ if .Params.flag }}x{{ end }}",
		"{{range .Params}}{{.}}{{end}}",
		"{{.Builtins.ReleaseChannel.Name | printf \"%q\"}}",
		"{{template \"x\"}}",
		"{{",
		"}}{{.",
		"plain text",
		// Runaway templates (B2): they must end with a limit error, bounded.
		"{{range 100000000}}x{{end}}",
		"{{range 100000000000}}{{end}}",
		"{{range 100000}}{{range 100000}}{{end}}{{end}}",
		"{{$x := \"ab\"}}{{range 100}}{{$x = printf \"%s%s\" $x $x}}{{end}}",
		"{{define \"t\"}}{{template \"t\" .}}{{end}}{{template \"t\" .}}",
		"{{printf \"%#v\" .}}",
		// One call that would build gigabytes is refused before formatting.
		"{{printf \"%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d%*d\" 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0 1000000 0}}",
		"{{$x := printf \"%0999999d\" 0}}{{print $x $x $x $x $x $x $x $x $x $x $x $x $x $x $x $x $x $x}}",
	} {
		f.Add(seed)
	}
	data := &Data{
		Params: map[string]any{"image": DockerImage{Registry: "docker.io", Repository: "library/nginx", Tag: "1.25"}, "flag": "yes", "n": int64(3),
			"token": Secret{raw: fuzzSecret}, "ref": Secret{Key: "k", Version: "1"}, "marked": Secret{raw: fuzzSecret, param: "marked"}},
		Constants: map[string]string{"tier": "gold"},
		Builtins: Builtins{
			ReleaseChannel: NameOnly{"staging"},
			Runtime:        RuntimeInfo{Name: "r", Labels: map[string]string{"region": "us"}},
			Service:        NameOnly{"svc"},
			Application:    NameOnly{"app"},
		},
	}
	f.Fuzz(func(t *testing.T, text string) {
		out, err := render(t.Context(), "fuzz", text, data)
		if strings.Contains(out, fuzzSecret) || (err != nil && strings.Contains(err.Error(), fuzzSecret)) {
			t.Fatalf("%q printed the raw secret", text)
		}
		if err != nil {
			line, msg := templateError(err)
			if line < 0 || msg == "" {
				t.Fatalf("bad error mapping for %q: line %d msg %q", err, line, msg)
			}
			return
		}
		if !strings.Contains(text, "{{") && out != text {
			t.Fatalf("static text changed: %q -> %q", text, out)
		}
		if len(out) > MaxTemplateOutput {
			t.Fatalf("rendered %d bytes, more than the limit", len(out))
		}
	})
}

// quotedEcho bounds one clipped value quoted with %q: a byte is written as
// up to 4 (an invalid one as \xdf), plus the clip's "... (N bytes)".
const quotedEcho = 4*config.MaxEcho + 32

// FuzzParams feeds command-line parameter values (--param and
// --param-by-release-channel) through parsing and type conversion: no panic,
// and errors quote at most a clipped value.
func FuzzParams(f *testing.F) {
	for _, seed := range []string{
		"image=1.25", "image=docker.io/library/nginx:1.25", "image=nginx@sha256:" + strings.Repeat("a", 64),
		"n=42", "n= 7 ", "n=9999999999999999999999", "commit=ABCDEF1", "blob=some content", "token=x",
		"=x", "image", "prod=image=1.0", "prod=", "a=b=c", "image=../../etc", "image=:", "image=a:b:c/d",
	} {
		f.Add(seed)
	}
	defs := []config.ParameterDefinition{
		{Name: "image", DockerImage: &config.DockerImageParameter{ImageRegistryInfo: &config.ImageRegistryInfo{ImageRepository: "library/nginx"}}},
		{Name: "n", Int: &config.IntParameter{}},
		{Name: "commit", Commit: &config.CommitParameter{}},
		{Name: "blob", Blob: &config.BlobParameter{}},
		{Name: "token", Secret: &config.SecretParameter{}},
		{Name: "s", String: &config.StringParameter{}},
	}
	f.Fuzz(func(t *testing.T, arg string) {
		var given []ParamValue
		if pv, err := ParseParam(arg); err == nil {
			given = append(given, pv)
		} else if len(err.Error()) > quotedEcho+200 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		if pv, err := ParseReleaseChannelParam(arg); err == nil {
			given = append(given, pv)
		}
		for _, placeholders := range []bool{false, true} {
			_, _, err := resolveParams(defs, given, "prod", placeholders)
			if err != nil && len(err.Error()) > 2*quotedEcho+400 {
				t.Fatalf("error of %d bytes for %q", len(err.Error()), arg)
			}
		}
	})
}

// FuzzHelmFileNames renders a chart holding a file with an odd name (and an
// odd .helmignore): it never panics, and a template under templates/ that is
// not ignored renders its object.
func FuzzHelmFileNames(f *testing.F) {
	for _, seed := range [][2]string{
		{"templates/cm.yaml", ""},
		{"templates/a+b (1).yaml", "*.bak"},
		{"templates/ha-1.21+/cm.yaml", "ha-1.21+/"},
		{"templates/ü.yaml", "templates/"},
		{"templates/../x.yaml", ""},
		{"templates/.hidden.yaml", ".*"},
		{"templates/x.yaml", "[z-a]"},
		{"charts/sub/templates/x.yaml", "!x"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, name, ignore string) {
		tree := &config.FileTree{Root: "chart", Files: map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: c\nversion: 0.1.0\n",
			".helmignore": ignore,
			name:          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fuzzed}\n",
		}}
		caps, _, err := helmCapabilities(nil, ClusterFacts{})
		if err != nil {
			t.Fatal(err)
		}
		helmSlot <- struct{}{} // renderChart's caller holds it
		r, err := renderChart(tree, "rel", "ns", map[string]any{}, caps)
		<-helmSlot
		if err == nil && strings.Contains(r.manifest, "name: fuzzed") && !strings.Contains(name, "templates/") {
			t.Errorf("%q rendered although it is not a template: %s", name, r.manifest)
		}
	})
}
