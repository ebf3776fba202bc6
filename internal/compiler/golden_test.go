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
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/manifest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func init() {
	config.RenderKustomize = manifest.RenderKustomizeDir
	config.KustomizeLocalRefs = manifest.KustomizeLocalRefs
}

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
			got, engineForm, isErr := runCase(t, dir, gc)
			checkGolden(t, filepath.Join(dir, "engine.json"), engineForm)
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

// checkGolden compares got with the file want, or rewrites it with -update;
// nil got means the file must not exist.
func checkGolden(t *testing.T, want string, got []byte) {
	t.Helper()
	if *update {
		if got == nil {
			_ = os.Remove(want)
			return
		}
		if err := os.WriteFile(want, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	expected, err := os.ReadFile(want)
	switch {
	case got == nil && err == nil:
		t.Errorf("%s exists but the case has no such output (run go test -update)", want)
	case got == nil:
	case err != nil:
		t.Fatalf("%v (output was:\n%s)", err, got)
	case !bytes.Equal(got, expected):
		t.Errorf("%s differs from the output (run go test -update to accept):\n%s", want, got)
	}
}

// engineForm is the golden text of the result's engine-facing form (raw
// secrets redacted). It also checks that the result as an earlier drover
// stored it decodes to the same form, so desired states pushed before an
// upgrade converge the same way after it.
func engineForm(t *testing.T, res *compiler.Result) []byte {
	t.Helper()
	eng, err := res.Engine()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := ds.Encode(eng)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := ds.Decode(stored)
	if err != nil {
		t.Fatal(err)
	}
	asStoredBefore, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := ds.Decode(asStoredBefore)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ds.Encode(decoded)
	b, _ := ds.Encode(legacy)
	if !bytes.Equal(a, b) || !bytes.Equal(a, stored) {
		t.Errorf("the engine form differs when decoded from what an earlier drover stored:\nnow:    %s\nbefore: %s", a, b)
	}
	for i := range eng.Channels {
		ch := &eng.Channels[i]
		for _, k := range ch.SecretEnv {
			ch.Env[k] = "(redacted)"
		}
	}
	out, err := json.MarshalIndent(eng.Channels, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func runCase(t *testing.T, dir string, gc goldenCase) ([]byte, []byte, bool) {
	t.Helper()
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		return errText(t, err), nil, true
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		return errText(t, errs.Err()), nil, true
	}
	if gc.Validate {
		if errs := compiler.ValidateSet(set); len(errs) > 0 {
			return errText(t, errs.Err()), nil, true
		}
		return []byte("valid\n"), nil, false
	}
	if errs := set.Validate(); len(errs) > 0 {
		return errText(t, errs.Err()), nil, true
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
			return errText(t, compiler.Locate(set, cerrs).Err()), nil, true
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
	return append(out, '\n'), engineForm(t, res), false
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
