package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

const testToken = "drover_SERVERTESTTOKEN0123456789"

// startServer runs a server on a loopback port and returns its address.
func startServer(t *testing.T, edge server.EdgeConfig) string {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	if edge.Auth == nil {
		edge.Auth = auth.NewTokenAuthenticator(testToken, auth.LocalIdentity)
	}
	srv, loop := server.NewTestServer(t, st, dir, edge)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Run(ctx, ln) }()
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		}
		_ = st.Close()
	})
	return ln.Addr().String()
}

// newRequest builds every raw request of these tests, with the credential.
func newRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+testToken)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

func TestB19TrailingGarbageRefused(t *testing.T) {
	t.Parallel()
	addr := startServer(t, server.EdgeConfig{})
	send := func(body string) (int, apiv1.ErrorResponse) {
		resp, err := http.DefaultClient.Do(newRequest(t, "POST", "http://"+addr+"/v1/apps/a/services/s:push", body))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var er apiv1.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&er)
		return resp.StatusCode, er
	}
	push := `{"params":[{"name":"image","value":"1.3"}]}`
	for _, body := range []string{push + " trailing garbage", push + push, push + " {}"} {
		code, er := send(body)
		if code != http.StatusBadRequest || !strings.Contains(er.Error.Message, "after the JSON value") {
			t.Errorf("body %q: status %d %+v, want 400 about data after the JSON value", body, code, er.Error)
		}
	}
	// The same body alone is read (and refused for the unknown service).
	if code, er := send(push + " \n"); code != http.StatusNotFound {
		t.Errorf("a well-formed body: status %d %+v, want 404", code, er.Error)
	}
}

func TestB24SlowBodyConnectionClosed(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	addr := startServer(t, server.EdgeConfig{BodyTimeout: limit})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/configs:apply HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{", addr, testToken)
	// The server must give up on its own; this deadline only bounds the test.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.Copy(io.Discard, conn) // until the server closes the connection
	if err != nil {
		t.Fatalf("the server held a connection whose body trickles in (%v after %s)", err, time.Since(start))
	}
	if took := time.Since(start); took > limit+5*time.Second {
		t.Errorf("closed only after %s, limit %s", took, limit)
	}
}

// The read deadline of request bodies must not end event streams.
func TestB24WatchOutlivesTheBodyDeadline(t *testing.T) {
	t.Parallel()
	const limit = 100 * time.Millisecond
	addr := startServer(t, server.EdgeConfig{BodyTimeout: limit})
	c := client.New("http://"+addr, client.WithToken(testToken))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan apiv1.Event, 1)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- c.Watch(ctx, "", "", 0, func(e apiv1.Event) error { got <- e; return errors.New("stop") })
	}()
	// Let the stream live well past the deadline, then make an event.
	resp, err := http.DefaultClient.Do(newRequest(t, "GET", "http://"+addr+"/v1/watch", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	<-time.After(5 * limit)
	if _, err := c.ApplyConfigs(ctx, apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{
		{Source: "rt.pvn.yaml", Body: json.RawMessage(`{"runtime":{"name":"r1","fake":{}}}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	// The raw stream opened before the wait delivers the event: it was not cut.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			break
		}
	}
	if err := sc.Err(); err != nil || !strings.Contains(sc.Text(), "configured") {
		t.Errorf("raw stream: last line %q, error %v", sc.Text(), err)
	}
	var e apiv1.Event
	select {
	case e = <-got:
	case err := <-watchErr:
		select {
		case e = <-got: // delivered, then stopped by the callback
		default:
			t.Fatalf("watch ended without an event: %v", err)
		}
	}
	if e.Type != "configured" {
		t.Errorf("event %+v", e)
	}
}
