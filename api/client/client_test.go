package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
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

func TestB9RequestsTimeOutOnAnUnresponsiveServer(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	c := client.New(silentServer(t), client.WithTimeout(limit))
	calls := map[string]func() error{
		"status": func() error { _, err := c.Status(t.Context(), "a", "s"); return err },
		"push":   func() error { _, err := c.Push(t.Context(), "a", "s", apiv1.PushRequest{}); return err },
		"apply":  func() error { _, err := c.ApplyConfigs(t.Context(), apiv1.ApplyConfigsRequest{}); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := call()
			if took := time.Since(start); took > limit+5*time.Second {
				t.Errorf("returned after %s, limit %s", took, limit)
			}
			if err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "--request-timeout") {
				t.Errorf("error %v, want one that says the server did not answer", err)
			}
		})
	}
}

// A caller's own deadline is reported as such, not as the client's timeout.
func TestB9CallerDeadlineIsNotTheClientTimeout(t *testing.T) {
	t.Parallel()
	c := client.New(silentServer(t), client.WithTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Status(ctx, "a", "s")
	if err == nil || strings.Contains(err.Error(), "did not answer") {
		t.Errorf("error %v, want the caller's deadline", err)
	}
}

// The event stream gives up on a server that never answers and connects
// again, until the caller's context ends.
func TestB9WatchDoesNotHangOnAnUnresponsiveServer(t *testing.T) {
	t.Parallel()
	c := client.New(silentServer(t), client.WithTimeout(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Watch(ctx, "a", "s", 0, func(apiv1.Event) error { return nil })
	if err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("watch returned %v after %s", err, time.Since(start))
	}
}

// TestEachService: the service list is read one service at a time, other
// fields skipped; a callback's error stops the read and is returned as it
// is; a list broken midway (a server that failed after it began) fails.
func TestEachService(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"/ok":     `{"next":{"a":[1,2]},"services":[{"application":"a","service":"x","status":"CONVERGED"},` + "\n" + `{"application":"b","service":"y","status":"FAILED"}` + "\n" + `]}`,
		"/broken": `{"services":[{"application":"a","service":"x","status":"CONVERGED"},{"appl`,
	}
	list := func(name string, fn func(*apiv1.ServiceStatus) error) error {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, bodies["/"+name])
		}))
		defer srv.Close()
		return client.New(srv.URL).EachService(t.Context(), fn)
	}
	var got []string
	if err := list("ok", func(st *apiv1.ServiceStatus) error {
		got = append(got, st.Application+"/"+st.Service+"="+st.Status)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "a/x=CONVERGED b/y=FAILED" {
		t.Errorf("listed %v", got)
	}
	errEnough := errors.New("enough")
	n := 0
	if err := list("ok", func(*apiv1.ServiceStatus) error { n++; return errEnough }); !errors.Is(err, errEnough) || n != 1 {
		t.Errorf("callback error: %v after %d services, want %v after 1", err, n, errEnough)
	}
	if err := list("broken", func(*apiv1.ServiceStatus) error { return nil }); err == nil {
		t.Error("a broken list read without an error")
	}
}

// TestErrorsWrapTheirCode: a server error matches its code with errors.Is
// (and no other), keeps status, message and details, and a response that
// is not an API error is an internal one.
func TestErrorsWrapTheirCode(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/apps/a/services/gone":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no service a/gone"}}`)
		case "/v1/apps/a/services/busy":
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"failed_precondition","message":"a/busy is paused","details":[{"kind":"service","name":"a/busy"}]}}`)
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>proxy error</html>")
		}
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)

	_, err := c.Status(t.Context(), "a", "gone")
	if !errors.Is(err, apiv1.CodeNotFound) || errors.Is(err, apiv1.CodeFailedPrecondition) || !client.IsNotFound(err) {
		t.Fatalf("not found: %v (%#v)", err, err)
	}
	_, err = c.Status(t.Context(), "a", "busy")
	var ce *client.Error
	if !errors.As(err, &ce) || !errors.Is(err, apiv1.CodeFailedPrecondition) || client.IsNotFound(err) {
		t.Fatalf("failed precondition: %v (%#v)", err, err)
	}
	if ce.Status != http.StatusConflict || ce.Message != "a/busy is paused" || len(ce.Details) != 1 || ce.Code.HTTPStatus() != ce.Status {
		t.Errorf("failed precondition: %+v", ce)
	}
	_, err = c.Status(t.Context(), "a", "proxied")
	if !errors.As(err, &ce) || !errors.Is(err, apiv1.CodeInternal) || ce.Status != http.StatusBadGateway || !strings.Contains(ce.Message, "502") {
		t.Fatalf("not an API error: %v (%#v)", err, err)
	}
}
