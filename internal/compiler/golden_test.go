package compiler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func init() { config.RenderKustomize = manifest.RenderKustomizeDir }

// goldenCase is testdata/<name>/case.yaml: what to compile in that tree.
type goldenCase struct {
	App                  string   `json:"app"`
	Service              string   `json:"service"`
	Params               []string `json:"params"`
	ReleaseChannelParams []string `json:"releaseChannelParams"`
	ReleaseChannels      []string `json:"releaseChannels"`
	// Validate runs ValidateSet on the tree instead of compiling one service.
	Validate bool `json:"validate"`
}

// TestGolden compiles every tree under testdata/ and compares the canonical
// JSON (or the located errors) with expected.json (or expected.err) beside it.
// Run with -update to rewrite the expected files.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/case.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no golden cases found")
	}
	for _, c := range dirs {
		dir := filepath.Dir(c)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			var gc goldenCase
			if err := yaml.UnmarshalStrict(raw, &gc); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			got, isErr := runCase(t, dir, gc)
			want := filepath.Join(dir, "expected.json")
			other := filepath.Join(dir, "expected.err")
			if isErr {
				want, other = other, want
			}
			if *update {
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
				_ = os.Remove(other)
				return
			}
			expected, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (output was:\n%s)", err, got)
			}
			if !bytes.Equal(got, expected) {
				t.Errorf("%s differs from the output (run go test -update to accept):\n%s", want, got)
			}
		})
	}
}

func runCase(t *testing.T, dir string, gc goldenCase) ([]byte, bool) {
	t.Helper()
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		return errText(t, err), true
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		return errText(t, errs.Err()), true
	}
	if gc.Validate {
		if errs := compiler.ValidateSet(set); len(errs) > 0 {
			return errText(t, errs.Err()), true
		}
		return []byte("valid\n"), false
	}
	if errs := set.Validate(); len(errs) > 0 {
		return errText(t, errs.Err()), true
	}
	in, err := compiler.InputFor(set, config.ServiceKey{Application: gc.App, Service: gc.Service})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range gc.Params {
		pv, err := compiler.ParseParam(p)
		if err != nil {
			t.Fatal(err)
		}
		in.Params = append(in.Params, pv)
	}
	for _, p := range gc.ReleaseChannelParams {
		pv, err := compiler.ParseReleaseChannelParam(p)
		if err != nil {
			t.Fatal(err)
		}
		in.Params = append(in.Params, pv)
	}
	in.ReleaseChannels = gc.ReleaseChannels
	res, err := compiler.Compile(in)
	if err != nil {
		var cerrs compiler.Errors
		if errors.As(err, &cerrs) {
			return errText(t, compiler.Locate(set, cerrs).Err()), true
		}
		t.Fatal(err)
	}
	if err := res.DesiredState.Check(); err != nil {
		t.Fatalf("desired state is inconsistent: %v", err)
	}
	tree, err := res.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(tree, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n'), false
}

func errText(t *testing.T, err error) []byte {
	t.Helper()
	l, ok := config.AsErrorList(err)
	if !ok {
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
	var b bytes.Buffer
	for _, e := range l {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return b.Bytes()
}
