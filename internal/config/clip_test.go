package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestB18LongValuesNotEchoed: a 10 MB application name gives short errors
// from loading and validation.
func TestB18LongValuesNotEchoed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := strings.Repeat("a", 10<<20)
	files := map[string]string{
		"app.pvn.yaml": "application:\n  name: " + name + "\n  releaseChannels:\n    - {name: rc, runtimes: [{runtime: r}]}\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var errs ErrorList
	sources, err := Load([]string{dir})
	if err != nil {
		l, ok := AsErrorList(err)
		if !ok {
			t.Fatalf("load: %v", err)
		}
		errs = l
	} else {
		set, serrs := NewSet(sources)
		errs = serrs
		if len(errs) == 0 {
			errs = set.Validate()
		}
	}
	if len(errs) == 0 {
		t.Fatal("a 10 MB name was accepted")
	}
	for _, e := range errs {
		if msg := e.Error(); len(msg) > 2*MaxEcho+len(dir)+256 {
			t.Errorf("error of %d bytes: %.300s...", len(msg), msg)
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	if got := Clip("short"); got != "short" {
		t.Errorf("Clip(short) = %q", got)
	}
	long := strings.Repeat("é", MaxEcho) // 2 bytes each: the cut falls inside a rune
	got := Clip(long)
	if !strings.HasSuffix(got, "... (512 bytes)") || !strings.HasPrefix(got, "é") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("Clip = %q", got)
	}
	for _, r := range strings.TrimSuffix(got, "... (512 bytes)") {
		if r != 'é' {
			t.Fatalf("cut inside a rune: %q", got)
		}
	}
}
