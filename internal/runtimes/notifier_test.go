package runtimes

import (
	"context"
	"testing"
	"time"
)

// watchInto starts a Watch whose notify sends each key to the returned
// channel after signalling entered and waiting for release (nil = no wait).
func watchInto(ctx context.Context, n *Notifier, entered chan<- InstanceKey, release <-chan struct{}) <-chan InstanceKey {
	out := make(chan InstanceKey, 16)
	go func() {
		_ = n.Watch(ctx, nil, func(k InstanceKey) {
			if entered != nil {
				entered <- k
			}
			if release != nil {
				<-release
			}
			out <- k
		})
	}()
	return out
}

func waitWatchers(t *testing.T, n *Notifier, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Watchers() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d watchers after 10s, want %d", n.Watchers(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// expectNone fails if ch delivers anything within a short grace.
func expectNone(t *testing.T, ch <-chan InstanceKey, who string) {
	t.Helper()
	select {
	case extra := <-ch:
		t.Fatalf("%s got a repeat %v", who, extra)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestNotifierCoalescesAndFansOut(t *testing.T) {
	t.Parallel()
	var n Notifier
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	entered, release := make(chan InstanceKey, 16), make(chan struct{})
	a := watchInto(ctx, &n, entered, release)
	b := watchInto(ctx, &n, nil, nil)
	waitWatchers(t, &n, 2)
	k1, k2 := InstanceKey{"a", "s", "rc1"}, InstanceKey{"a", "s", "rc2"}
	// One call queues both keys before a wakes, so a takes both in one batch.
	n.Notify(k1, k2)
	if got := <-entered; got != k1 {
		t.Fatalf("a started delivering %v first", got)
	}
	// a is busy delivering k1 and k2 is taken but not delivered yet: repeats
	// of k2 coalesce into that pending delivery (the flake this test caught:
	// they were queued again and delivered twice).
	for range 5 {
		n.Notify(k2)
	}
	close(release)
	if got := <-a; got != k1 {
		t.Fatalf("a got %v first", got)
	}
	if got := <-entered; got != k2 {
		t.Fatalf("a started delivering %v second", got)
	}
	if got := <-a; got != k2 {
		t.Fatalf("a got %v second", got)
	}
	expectNone(t, a, "a")
	// b was never busy: it got both keys, and the later notifications of k2
	// may each have arrived after its delivery, so they need not coalesce.
	for _, want := range []InstanceKey{k1, k2} {
		if got := <-b; got != want {
			t.Fatalf("b got %v, want %v", got, want)
		}
	}

	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- n.Watch(context.Background(), stop, func(InstanceKey) {}) }()
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("Watch after stop: %v", err)
	}
}

// A key notified while it is being delivered is delivered again: the
// consumer may have read the state before the change.
func TestNotifierRedeliversKeyNotifiedDuringItsDelivery(t *testing.T) {
	t.Parallel()
	var n Notifier
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	entered, release := make(chan InstanceKey, 16), make(chan struct{}, 16)
	a := watchInto(ctx, &n, entered, release)
	waitWatchers(t, &n, 1)
	k := InstanceKey{"a", "s", "rc1"}
	n.Notify(k)
	<-entered
	n.Notify(k)
	n.Notify(k)
	release <- struct{}{}
	if got := <-a; got != k {
		t.Fatalf("got %v", got)
	}
	if got := <-entered; got != k {
		t.Fatalf("second delivery of %v", got)
	}
	release <- struct{}{}
	if got := <-a; got != k {
		t.Fatalf("got %v", got)
	}
	expectNone(t, a, "a")
}
