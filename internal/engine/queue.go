package engine

import (
	"container/heap"
	"sync"
	"time"
)

// queue is a level-triggered work queue of keys, in the manner of client-go's
// workqueue: a key is queued at most once; a key added while it is being
// processed is processed again afterwards (never concurrently); AddAfter
// schedules a key for later, keeping only the earliest time; AddFirst
// queues a key ahead of the others.
type queue struct {
	mu   sync.Mutex
	cond *sync.Cond
	// first and ready are the keys queued, first taken before ready.
	// queued has each queued key's current entry (its number): the
	// others (a key moved ahead by AddFirst) are passed over.
	first      []entry
	ready      []entry
	queued     map[string]uint64
	entries    uint64
	processing map[string]bool
	// dirty are the keys added while processed: true for AddFirst.
	dirty     map[string]bool
	delayed   delayHeap
	delayedAt map[string]time.Time
	timer     *time.Timer
	closed    bool
	now       func() time.Time
}

// entry is a key in first or ready.
type entry struct {
	key string
	n   uint64
}

func newQueue(now func() time.Time) *queue {
	q := &queue{queued: map[string]uint64{}, processing: map[string]bool{}, dirty: map[string]bool{}, delayedAt: map[string]time.Time{}, now: now}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues key now.
func (q *queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *queue) addLocked(key string) {
	if q.closed {
		return
	}
	if q.processing[key] {
		if _, ok := q.dirty[key]; !ok {
			q.dirty[key] = false // keeps an AddFirst's true
		}
		return
	}
	if _, ok := q.queued[key]; ok {
		return
	}
	q.ready = append(q.ready, q.newEntry(key))
	q.cond.Signal()
}

// newEntry makes key's current entry.
func (q *queue) newEntry(key string) entry {
	q.entries++
	q.queued[key] = q.entries
	return entry{key, q.entries}
}

// AddFirst queues key now, ahead of the keys Add queued: a pass has work
// waiting for it (an outcome to record).
func (q *queue) AddFirst(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	q.first = append(q.first, q.newEntry(key)) // one in ready is passed over
	q.cond.Signal()
}

// AddIfIdle queues key now unless it is queued, being processed or
// scheduled for later already.
func (q *queue) AddIfIdle(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.queued[key]; ok || q.processing[key] {
		return
	}
	if _, ok := q.delayedAt[key]; ok {
		return
	}
	q.addLocked(key)
}

// AddAfter queues key after d, unless it is due earlier already.
func (q *queue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	at := q.now().Add(d)
	if prev, ok := q.delayedAt[key]; ok && !at.Before(prev) {
		return
	}
	q.delayedAt[key] = at
	heap.Push(&q.delayed, delayItem{key: key, at: at})
	q.armLocked()
}

// armLocked sets the timer for the earliest delayed key.
func (q *queue) armLocked() {
	for q.delayed.Len() > 0 {
		top := q.delayed[0]
		if at, ok := q.delayedAt[top.key]; !ok || !at.Equal(top.at) {
			heap.Pop(&q.delayed) // superseded by an earlier schedule
			continue
		}
		wait := top.at.Sub(q.now())
		if wait <= 0 {
			heap.Pop(&q.delayed)
			delete(q.delayedAt, top.key)
			q.addLocked(top.key)
			continue
		}
		if q.timer == nil {
			q.timer = time.AfterFunc(wait, q.fire)
		} else {
			q.timer.Reset(wait)
		}
		return
	}
}

func (q *queue) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.armLocked()
}

// Get blocks until a key is ready or the queue is closed (ok false).
func (q *queue) Get() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		for len(q.first) == 0 && len(q.ready) == 0 && !q.closed {
			q.cond.Wait()
		}
		if q.closed {
			return "", false
		}
		var e entry
		if len(q.first) > 0 {
			e, q.first = q.first[0], q.first[1:]
		} else {
			e, q.ready = q.ready[0], q.ready[1:]
		}
		key := e.key
		if n, ok := q.queued[key]; !ok || n != e.n {
			continue // not the key's current entry
		}
		delete(q.queued, key)
		q.processing[key] = true
		return key, true
	}
}

// Done marks key processed; if it was added meanwhile it is queued again.
func (q *queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	first, ok := q.dirty[key]
	if !ok {
		return
	}
	delete(q.dirty, key)
	if first {
		q.first = append(q.first, q.newEntry(key))
		q.cond.Signal()
		return
	}
	q.addLocked(key)
}

// Len is the number of keys ready to be processed.
func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// Close wakes every Get and drops pending work.
func (q *queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.cond.Broadcast()
}

type delayItem struct {
	key string
	at  time.Time
}

type delayHeap []delayItem

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(delayItem)) }
func (h *delayHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
