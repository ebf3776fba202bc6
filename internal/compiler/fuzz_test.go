package compiler

import (
	"strings"
	"testing"
)

// FuzzRender feeds arbitrary template text through the renderer and the error
// formatter: neither may panic, and a successful render of text without "{{"
// returns it unchanged.
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
	} {
		f.Add(seed)
	}
	data := &Data{
		Params:    map[string]any{"image": DockerImage{Registry: "docker.io", Repository: "library/nginx", Tag: "1.25"}, "flag": "yes", "n": int64(3)},
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
	})
}
