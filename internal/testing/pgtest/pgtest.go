// Package pgtest gives tests a real PostgreSQL server on 127.0.0.1, started once per test
// binary by hack/pg/up.sh from Debian's postgresql packages, and a fresh database per test:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) } // runs the tests, then stops the server
//
//	func TestStore(t *testing.T) {
//		url := pgtest.NewDatabase(t) // postgres://…/t_N, dropped with the server
//	}
//
// DROVER_TEST_DATABASE_URL points the tests at a server of your own instead (each test still
// gets its own database in it). Without PostgreSQL binaries the tests skip, unless
// DROVER_REQUIRE_POSTGRES=1 (CI sets it), which makes that a failure. The server stops when the
// test binary exits even if Stop never runs (the script's watchdog).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Env names.
const (
	// URLEnv names a server to use instead of starting one.
	URLEnv = "DROVER_TEST_DATABASE_URL"
	// RequireEnv, set to 1, turns a missing PostgreSQL into a test failure.
	RequireEnv = "DROVER_REQUIRE_POSTGRES"
)

var (
	mu       sync.Mutex
	started  bool
	baseURL  string // the server's postgres database
	state    string // the state dir of a server this binary started
	startErr error
	seq      atomic.Int64
)

// Main runs the tests, then stops the server they shared.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// URL returns the URL of the shared server's "postgres" database, starting the server on
// first use. It skips t when no PostgreSQL can be had (see RequireEnv).
func URL(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		baseURL, startErr = start()
	}
	if startErr != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("pgtest: %v", startErr)
		}
		t.Skipf("pgtest: %v (set %s=1 to fail instead)", startErr, RequireEnv)
	}
	return baseURL
}

// NewDatabase creates an empty database on the shared server and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	base := URL(t)
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), seq.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return withDatabase(base, name)
}

// withDatabase replaces the database of a postgres:// URL.
func withDatabase(url, name string) string {
	rest, query, _ := strings.Cut(url, "?")
	i := strings.LastIndex(rest, "/")
	out := rest[:i+1] + name
	if query != "" {
		out += "?" + query
	}
	return out
}

// Stop stops a server this binary started (a server from URLEnv is left alone).
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if state == "" {
		return
	}
	_ = exec.Command("bash", filepath.Join(repoRoot(), "hack", "pg", "down.sh"), state).Run() //nolint:gosec // our own script
	state = ""
}

func start() (string, error) {
	if u := os.Getenv(URLEnv); u != "" {
		return u, nil
	}
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("the test server is started on Linux only; set %s", URLEnv)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "hack", "pg", "up.sh")) //nolint:gosec // our own script
	cmd.Env = append(os.Environ(), fmt.Sprintf("DROVER_PG_PORT=%d", port), fmt.Sprintf("DROVER_PG_WATCH_PID=%d", os.Getpid()), "DROVER_PG_STATE=")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("start PostgreSQL: %s", msg)
	}
	var url string
	for _, f := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(string(out)), "export ")) {
		k, v, _ := strings.Cut(f, "=")
		v = strings.Trim(v, "'")
		switch k {
		case "DATABASE_URL":
			url = v
		case "DROVER_PG_STATE":
			state = v
		}
	}
	if url == "" {
		return "", fmt.Errorf("hack/pg/up.sh printed no DATABASE_URL: %s", out)
	}
	return url, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// repoRoot is the module root, found from this file's directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
