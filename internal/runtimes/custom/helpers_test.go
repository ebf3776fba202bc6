package custom

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// recorder keeps the runs a runtime reports.
type recorder struct {
	mu   sync.Mutex
	runs []runtimes.Run
}

func (rec *recorder) RecordRun(_ context.Context, r runtimes.Run) error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.runs = append(rec.runs, r)
	return nil
}

func (rec *recorder) list(kind string) []runtimes.Run {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []runtimes.Run
	for _, r := range rec.runs {
		if kind == "" || r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// script writes an executable shell script into dir and returns its path.
func script(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func task(argv ...string) *config.TaskConfig {
	return &config.TaskConfig{Program: &config.Program{Cmd: argv}}
}

func dur(s string) config.Duration {
	d, err := config.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

func plain(kv ...string) map[string]config.EnvValue {
	m := map[string]config.EnvValue{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = config.EnvValue{Value: kv[i+1]}
	}
	return m
}

const testRuntime = "test-rt"

// target builds a target whose object is the compiled custom runtime
// object for cr.
func target(key runtimes.InstanceKey, version string, cr *config.CustomRuntime) runtimes.Target {
	obj := map[string]any{
		"kind":            "custom",
		"runtime":         testRuntime,
		"parameterValues": map[string]any{"version": version, "instance": key.String()},
		"custom":          cr,
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return runtimes.Target{InstanceKey: key, Version: version, DesiredStateID: "ds-" + version, Objects: []json.RawMessage{b}, Backend: "customRuntime"}
}

func key(svc, rc string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "app", Service: svc, ReleaseChannel: rc}
}

func newRuntime(t testing.TB, opts runtimes.Options) *Runtime {
	t.Helper()
	r, err := New(&config.Runtime{Name: testRuntime, Custom: &config.CustomRuntime{}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// eventually polls cond until it holds or fails t after 10s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
