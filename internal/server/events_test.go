package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/server"
)

// Event streams and lists keep only the types asked for, and a stream so
// filtered still delivers what comes later.
func TestEventsOfSomeTypes(t *testing.T) {
	t.Parallel()
	addr := startServer(t, server.EdgeConfig{})
	c := client.New("http://"+addr, client.WithToken(testToken))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := c.ApplyConfigs(ctx, apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{
		{Source: "rt.pvn.yaml", Body: json.RawMessage(`{"runtime":{"name":"rt","fake":{}}}`)},
		{Source: "shop.pvn.yaml", Body: json.RawMessage(`{"application":{"name":"shop","releaseChannels":[{"name":"one","runtimes":[{"runtime":"rt"}]},{"name":"two","runtimes":[{"runtime":"rt"}]}]}}`)},
		{Source: "web.pvn.yaml", Body: json.RawMessage(`{"service":{"name":"web","application":"shop","kubernetesConfig":{"type":"KUBERNETES",` +
			`"inlined":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"}}}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	// The stream starts before the push: the events it skips come first.
	converged := make(chan apiv1.Event, 16)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- c.WatchTypes(ctx, "", "", 0, []string{"pushed", "converged"}, func(e apiv1.Event) error {
			converged <- e
			return nil
		})
	}()
	if _, err := c.Push(ctx, "shop", "web", apiv1.PushRequest{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		select {
		case e := <-converged:
			got = append(got, e.Type+" "+e.ReleaseChannel)
		case err := <-watchErr:
			t.Fatalf("watch ended: %v (after %q)", err, got)
		case <-ctx.Done():
			t.Fatalf("the filtered stream delivered %q, want a push and two converged instances", got)
		}
	}
	slices.Sort(got)
	if want := []string{"converged one", "converged two", "pushed "}; !slices.Equal(got, want) {
		t.Errorf("filtered stream: %q, want %q", got, want)
	}

	all, err := c.Events(ctx, "shop", "web", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	some, err := c.Events(ctx, "shop", "web", 0, 0, "applied", "converged")
	if err != nil {
		t.Fatal(err)
	}
	var want []apiv1.Event
	for _, e := range all.Events {
		if e.Type == "applied" || e.Type == "converged" {
			want = append(want, e)
		}
	}
	if len(want) != 4 || len(some.Events) != len(want) {
		t.Fatalf("events of types applied and converged: %+v, of all %+v", some.Events, all.Events)
	}
	for i := range want {
		if some.Events[i].Seq != want[i].Seq {
			t.Errorf("event %d: %+v, want %+v", i, some.Events[i], want[i])
		}
	}

	// An unknown type is refused, naming it.
	for _, path := range []string{"/v1/apps/shop/services/web/events?type=converged,bogus", "/v1/watch?type=bogus"} {
		resp, err := http.DefaultClient.Do(newRequest(t, "GET", "http://"+addr+path, ""))
		if err != nil {
			t.Fatal(err)
		}
		var er apiv1.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&er)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || er.Error.Code != "invalid_argument" || !strings.Contains(er.Error.Message, `"bogus"`) {
			t.Errorf("GET %s: %d %+v, want 400 invalid_argument naming the type", path, resp.StatusCode, er.Error)
		}
	}
	cancel()
	if err := <-watchErr; !errors.Is(err, context.Canceled) {
		t.Errorf("watch: %v", err)
	}
}

// A push's audit record is written with the push (once); a refused push
// gets its record as every other request.
func TestPushAuditedOnce(t *testing.T) {
	t.Parallel()
	addr := startServer(t, server.EdgeConfig{})
	c := client.New("http://"+addr, client.WithToken(testToken))
	ctx := t.Context()
	if _, err := c.ApplyConfigs(ctx, apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{
		{Source: "rt.pvn.yaml", Body: json.RawMessage(`{"runtime":{"name":"rt","fake":{}}}`)},
		{Source: "shop.pvn.yaml", Body: json.RawMessage(`{"application":{"name":"shop","releaseChannels":[{"name":"one","runtimes":[{"runtime":"rt"}]}]}}`)},
		{Source: "web.pvn.yaml", Body: json.RawMessage(`{"service":{"name":"web","application":"shop","kubernetesConfig":{"type":"KUBERNETES",` +
			`"inlined":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"}}}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(ctx, "shop", "web", apiv1.PushRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(ctx, "shop", "nope", apiv1.PushRequest{}); err == nil {
		t.Fatal("push of an unknown service: no error")
	}
	log, err := c.Audit(ctx, client.AuditQuery{Application: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	var pushes []string
	for _, r := range log.Records {
		if strings.HasSuffix(r.Action, ":push") {
			pushes = append(pushes, fmt.Sprintf("%s %s %d %s", r.Service, r.Identity, r.Status, r.Outcome))
		}
	}
	if want := []string{"web local 200 ok", "nope local 404 not_found"}; !slices.Equal(pushes, want) {
		t.Errorf("audit records of the pushes: %q, want %q", pushes, want)
	}
}
