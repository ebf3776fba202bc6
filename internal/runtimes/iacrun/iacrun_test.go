package iacrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	b := NewTailBuffer(8)
	_, _ = b.Write([]byte("hello"))
	if b.String() != "hello" || b.Truncated() {
		t.Fatalf("%q %v", b.String(), b.Truncated())
	}
	for range 10 {
		_, _ = b.Write([]byte("0123456"))
	}
	if got := b.String(); got != "60123456" || !b.Truncated() {
		t.Fatalf("%q %v", got, b.Truncated())
	}
	b = NewTailBuffer(4)
	_, _ = b.Write([]byte("abc€€"))
	if got := b.String(); got != "€" {
		t.Fatalf("%q, want the end starting at a character", got)
	}
}

// TestSyncOwned: names the tool owns are neither copied nor pruned; a name
// owned unless copied is copied when the source has it, else kept; skipped
// names are skipped at any depth; errors use the noun and the flag.
func TestSyncOwned(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	for name, content := range map[string]string{"main": "m", "state": "from the source", "sub/.git/HEAD": "h", "sub/x": "x"} {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lim := Limits{Roots: []string{"/"}, Owned: map[string]bool{"state": true}, OwnedUnlessCopied: map[string]bool{"lock": true},
		Skip: map[string]bool{".git": true}, Noun: "program", RootFlag: "--x-root"}
	if _, err := Sync(src, dst, lim); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"state", "lock", "extra"} {
		if err := os.WriteFile(filepath.Join(dst, name), []byte("the tool's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Sync(src, dst, lim); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"main": "m", "state": "the tool's", "lock": "the tool's", "sub/x": "x"} {
		if b, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(name))); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"extra", "sub/.git"} {
		if _, err := os.Stat(filepath.Join(dst, filepath.FromSlash(name))); err == nil {
			t.Errorf("%s is in the copy", name)
		}
	}
	lim.Roots = nil
	if _, err := Sync(src, dst, lim); err == nil || !strings.Contains(err.Error(), "parameter path: program directory "+src) || !strings.Contains(err.Error(), "no program directory is (allow one with --x-root DIR") {
		t.Errorf("no roots: %v", err)
	}
}

// TestOverlay: the target's env, then the runner's (a raw secret in
// clear, an unresolved reference refused), then the identity variables.
func TestOverlay(t *testing.T) {
	t.Parallel()
	tg := runtimes.Target{InstanceKey: runtimes.InstanceKey{Application: "a", Service: "s", ReleaseChannel: "rc"}, Version: "v1",
		Env: map[string]string{"X": "target", "PVN_SERVICE": "overridden"}}
	runner := &config.TerraformRunner{Env: map[string]config.EnvValue{"X": {Value: "runner"}, "TOKEN": {RawSecret: "tok"}}}
	env, err := Overlay(tg, runner, "fooRunner")
	if err != nil || env["X"] != "runner" || env["TOKEN"] != "tok" || env["PVN_SERVICE"] != "s" || env["PVN_RELEASE_CHANNEL_ID"] != "a/rc" || env["DROVER_SERVICE_VERSION"] != "v1" {
		t.Fatalf("%v, %v", env, err)
	}
	runner.Env["REF"] = config.EnvValue{Secret: &config.SecretRef{Key: "k", Version: "1"}}
	if _, err := Overlay(tg, runner, "fooRunner"); err == nil || !strings.Contains(err.Error(), "fooRunner.env.REF") {
		t.Errorf("unresolved reference: %v", err)
	}
	if got := RawSecrets(tg, runner, "more"); len(got) != 2 {
		t.Errorf("raw secrets %q", got)
	}
}

// TestJobError: the step fail printed names the failure; else the
// command's own.
func TestJobError(t *testing.T) {
	t.Parallel()
	err := JobError("tool plan", 1, "boom\ndrover: preRun[0] (make) failed (exit code 3)\n", strings.TrimSpace)
	if err == nil || err.Error() != "preRun[0] (make) failed (exit code 3): boom" {
		t.Errorf("%v", err)
	}
	if err := JobError("tool plan", 1, "", strings.TrimSpace); err.Error() != "tool plan failed (exit code 1): no output" {
		t.Errorf("%v", err)
	}
}

// TestOutcomeRedact: raw secrets leave an outcome's output and error.
func TestOutcomeRedact(t *testing.T) {
	t.Parallel()
	o := Outcome{Stdout: "a secret-value-1", Stderr: "secret-value-1", Err: errors.New("failed: secret-value-1")}.Redact(redact.New([]string{"secret-value-1"}))
	if strings.Contains(o.Stdout+o.Stderr+o.Err.Error(), "secret-value-1") {
		t.Errorf("%+v", o)
	}
	if ExitCode(context.Background(), nil) != 0 {
		t.Error("exit code of no error")
	}
}
