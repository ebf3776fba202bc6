package runtimes

import (
	"context"
	"testing"
	"time"
)

func TestNotifierCoalescesAndFansOut(t *testing.T) {
	t.Parallel()
	var n Notifier
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, b := make(chan InstanceKey, 16), make(chan InstanceKey, 16)
	block := make(chan struct{})
	go func() { _ = n.Watch(ctx, nil, func(k InstanceKey) { <-block; a <- k }) }()
	go func() { _ = n.Watch(ctx, nil, func(k InstanceKey) { b <- k }) }()
	for n.Watchers() < 2 {
		time.Sleep(time.Millisecond)
	}
	k1, k2 := InstanceKey{"a", "s", "rc1"}, InstanceKey{"a", "s", "rc2"}
	n.Notify(k1)
	if got := <-b; got != k1 {
		t.Fatalf("b got %v", got)
	}
	// a is busy delivering k1: repeats of k2 are coalesced into one.
	for range 5 {
		n.Notify(k2)
	}
	close(block)
	if got := <-a; got != k1 {
		t.Fatalf("a got %v first", got)
	}
	if got := <-a; got != k2 {
		t.Fatalf("a got %v second", got)
	}
	select {
	case extra := <-a:
		t.Fatalf("a got a repeat %v", extra)
	case <-time.After(50 * time.Millisecond):
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- n.Watch(context.Background(), stop, func(InstanceKey) {}) }()
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("Watch after stop: %v", err)
	}
}
