package engine

import (
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
