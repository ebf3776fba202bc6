package engine

import (
	"strings"
	"testing"
	"time"
)

// TestQueueAddIfIdle: AddIfIdle queues a key nothing is scheduled for, and
// leaves alone a key that is queued, being processed or scheduled later.
func TestQueueAddIfIdle(t *testing.T) {
	t.Parallel()
	q := newQueue(time.Now)
	defer q.Close()
	q.AddIfIdle("a")
	q.AddIfIdle("a")
	if q.Len() != 1 {
		t.Fatalf("%d keys ready, want 1", q.Len())
	}
	k, _ := q.Get()
	q.AddIfIdle(k) // being processed: not marked to run again
	q.Done(k)
	if q.Len() != 0 {
		t.Fatalf("a key processed when AddIfIdle came was queued again")
	}
	q.AddAfter("b", time.Hour)
	q.AddIfIdle("b")
	if q.Len() != 0 {
		t.Fatal("a key scheduled for later was queued now")
	}
}

// TestQueueAddFirst: AddFirst queues a key ahead of those Add queued, once
// (whether it was queued already or not), and a key AddFirst marks while it
// is processed comes first again once done.
func TestQueueAddFirst(t *testing.T) {
	t.Parallel()
	q := newQueue(time.Now)
	defer q.Close()
	for _, k := range []string{"a", "b", "c"} {
		q.Add(k)
	}
	q.AddFirst("c")
	q.AddFirst("d")
	q.AddFirst("d")
	if q.Len() != 4 {
		t.Fatalf("%d keys ready, want 4", q.Len())
	}
	if got, want := drain(q), "c d a b"; got != want {
		t.Fatalf("keys came as %q, want %q", got, want)
	}
	q.Add("a")
	q.Add("b")
	k, _ := q.Get() // a, processed
	q.AddFirst(k)
	q.Add(k)
	q.Add("c")
	q.Done(k)
	if got, want := drain(q), "a b c"; got != want {
		t.Fatalf("after AddFirst while processed, keys came as %q, want %q", got, want)
	}
	// Entries a key left behind (queued twice, or moved ahead) do not
	// move it ahead when it is queued again later.
	for _, first := range [][]string{{"a", "a"}, {"a"}} {
		if len(first) == 1 {
			q.Add("a")
		}
		for _, k := range first {
			q.AddFirst(k)
		}
		k, _ := q.Get()
		q.Done(k)
		q.Add("b")
		q.Add("a")
		if got, want := drain(q), "b a"; got != want {
			t.Fatalf("after AddFirst %v, keys came as %q, want %q", first, got, want)
		}
	}
}

// drain processes the keys ready in q and returns them in order.
func drain(q *queue) string {
	var got []string
	for q.Len() > 0 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	return strings.Join(got, " ")
}
