package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// TestFeed: a store handle listening hears, within a second, what another
// handle on the database commits: events, tasks, and the services that
// pushes, approvals and unfenced batches change; fenced batches (an
// engine's own pass) name no service, and rolled-back writes say nothing.
func TestFeed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	listener, writer := openURL(t, url), openURL(t, url)

	changes := make(chan store.Change, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- listener.Listen(ctx, func(c store.Change) { changes <- c }) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	}()
	// Listening starts in the background: a first write until heard.
	expect := func(what string, want func(store.Change) bool) {
		t.Helper()
		timeout := time.After(time.Second)
		for {
			select {
			case c := <-changes:
				if want(c) {
					return
				}
			case <-timeout:
				t.Fatalf("%s: not heard within a second", what)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for heard := false; !heard; {
		if err := writer.AppendEvents(t.Context(), store.Event{Type: "note", Message: "hello"}); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-changes:
			heard = c.Events
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the listener never heard an event")
			}
		}
	}
	drain := func() {
		for {
			select {
			case <-changes:
			case <-time.After(200 * time.Millisecond):
				return
			}
		}
	}
	drain()

	if err := writer.CreateDesiredState(t.Context(), store.DesiredState{ID: "ds-1", Application: "shop", Service: "web", Version: "v1", Compiled: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	expect("a push", func(c store.Change) bool { return c.Application == "shop" && c.Service == "web" })
	drain()

	inst := store.Instance{Application: "shop", Service: "api", ReleaseChannel: "prod", DesiredStateID: "ds-1"}
	if err := writer.Write(t.Context(), &store.Batch{Instances: []store.Instance{inst},
		Tasks: []store.Task{{Key: "shop/api", Instance: "prod", Kind: "apply"}}}); err != nil {
		t.Fatal(err)
	}
	seen := store.Change{}
	expect("an unfenced batch with a task", func(c store.Change) bool {
		seen.Tasks = seen.Tasks || c.Tasks
		if c.Service == "api" {
			seen.Service = c.Service
		}
		return seen.Tasks && seen.Service == "api"
	})
	drain()

	// A fenced batch names no service.
	l, err := writer.ClaimLease(t.Context(), "service/shop/db", "engine", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Write(t.Context(), &store.Batch{Fence: &store.Fence{Key: l.Key, Token: l.Token},
		Instances: []store.Instance{{Application: "shop", Service: "db", ReleaseChannel: "prod", DesiredStateID: "ds-1"}},
		Events:    []store.Event{{Application: "shop", Service: "db", Type: "note", Message: "planned"}}}); err != nil {
		t.Fatal(err)
	}
	expect("a fenced batch's events", func(c store.Change) bool {
		if c.Service != "" {
			t.Errorf("a fenced batch named service %s/%s", c.Application, c.Service)
		}
		return c.Events
	})
	drain()

	// Runtime configs and links: runtime hosts build again.
	if _, _, err := writer.PutConfig(t.Context(), store.ConfigObject{Kind: "runtime", Name: "k8s", Body: []byte(`{}`), Hash: "h1"}); err != nil {
		t.Fatal(err)
	}
	expect("a runtime config", func(c store.Change) bool { return c.Runtimes })
	drain()
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"a link", func() error {
			return writer.LinkRuntime(t.Context(), store.LinkedRuntime{Name: "edge", TokenHash: "aa"})
		}},
		{"a new token", func() error { return writer.SetLinkToken(t.Context(), "edge", "bb") }},
		{"an unlink", func() error { return writer.UnlinkRuntime(t.Context(), "edge") }},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		expect(step.what, func(c store.Change) bool { return c.Runtimes })
		drain()
	}

	// A write that fails says nothing.
	if err := writer.Write(t.Context(), &store.Batch{Instances: []store.Instance{{Application: "shop", Service: "gone",
		ReleaseChannel: "prod", Revision: 7}}}); err == nil {
		t.Fatal("a stale revision was written")
	}
	select {
	case c := <-changes:
		t.Errorf("a failed write was heard: %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
}

func openURL(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestFeedSurvivesPings: the feed pings its connection when nothing comes
// for a while, and hears what comes after several pings.
func TestFeedSurvivesPings(t *testing.T) {
	old := listenPing
	listenPing = 50 * time.Millisecond
	defer func() { listenPing = old }()
	url := pgtest.NewDatabase(t)
	listener, writer := openURL(t, url), openURL(t, url)
	changes := make(chan store.Change, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- listener.Listen(ctx, func(c store.Change) { changes <- c }) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	}()
	time.Sleep(400 * time.Millisecond) // several pings
	deadline := time.After(5 * time.Second)
	for {
		if err := writer.AppendEvents(t.Context(), store.Event{Type: "note", Message: "after pings"}); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-changes:
			if c.Lost {
				t.Fatal("the feed lost its connection while idle")
			}
			if c.Events {
				return
			}
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("nothing heard after the pings")
		}
	}
}
