package cli

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentServer accepts connections and never answers; it returns its URL.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// run runs the CLI with args and returns its exit code and stderr.
func run(t *testing.T, args ...string) (int, string, time.Duration) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := NewRoot(&stdout, &stderr)
	root.SetArgs(args)
	start := time.Now()
	err := root.ExecuteContext(t.Context())
	took := time.Since(start)
	var exit *ExitError
	switch {
	case err == nil:
		return 0, stderr.String(), took
	case errors.As(err, &exit):
		return exit.Code, stderr.String() + exit.Error(), took
	}
	return 1, stderr.String() + err.Error(), took
}

func TestB17WaitOnAnUnresponsiveServerTimesOut(t *testing.T) {
	t.Parallel()
	url := silentServer(t)
	code, stderr, took := run(t, "wait", "web", "--app", "quickstart", "--timeout", "1s", "--server", url, "--token", "x")
	if code != 3 || !strings.Contains(stderr, "timed out after 1s") {
		t.Errorf("exit %d (%s), want 3 (timeout)", code, stderr)
	}
	if took > 10*time.Second {
		t.Errorf("took %s", took)
	}
}

func TestB9CLIRequestTimeout(t *testing.T) {
	t.Parallel()
	url := silentServer(t)
	for _, args := range [][]string{
		{"status", "web", "--app", "quickstart"},
		{"approve", "web", "--app", "quickstart", "--release-channel", "prod"},
		{"push", "web", "--app", "quickstart", "--param", "image=1"},
	} {
		code, stderr, took := run(t, append(args, "--server", url, "--token", "x", "--request-timeout", "300ms")...)
		if code != 1 || !strings.Contains(stderr, "did not answer") {
			t.Errorf("%v: exit %d (%s), want 1 saying the server did not answer", args, code, stderr)
		}
		if took > 10*time.Second {
			t.Errorf("%v took %s", args, took)
		}
	}
}
