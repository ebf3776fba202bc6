package sqlite

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/store"
)

// The instance cache keeps each service's instances as they are stored, so
// that the engine's pass over a service (and the completion of its tasks)
// reads them without a query. It is correct because this Store is the only
// writer of its file: every server takes its data directory's lock, and
// every instance write goes through putInstance (or an import), whose
// committed rows the cache takes in after the commit.
//
// A miss reads the database and fills the cache only if no write to the
// service committed meanwhile: each service has a generation, raised by
// every commit that writes it, read before the query and compared after.
//
// The same entries keep each service's active desired state (without its
// compiled form), which the engine reads on every pass: a push
// (CreateDesiredState) or an import drops it, the next read fills it.

// cacheLimit bounds the instances kept; beyond it, services are dropped
// (they are read again from the database on their next miss).
const cacheLimit = 250_000

type instanceCache struct {
	mu   sync.Mutex
	svcs map[svcKey]*cachedService
	// held counts the instances in the cached lists.
	held int
	// limit is cacheLimit, or a test's smaller bound.
	limit int
	// importing counts commits under way that may change any service (an
	// import): until they end, every read goes to the file.
	importing int
	// imports changes whenever such a commit begins or ends: a row read
	// from the cache before it changed may not be the file's any longer,
	// even at the same revision.
	imports atomic.Uint64
}

type svcKey struct{ app, svc string }

type cachedService struct {
	gen uint64
	// pending counts commits under way that write the service: until
	// they end, reads go to the file (which may already hold them).
	pending int
	// list is the service's instances ordered by release channel, packed,
	// valid when ok.
	list []packedRow
	ok   bool
	// active is the service's active desired state, valid when activeOK.
	active   store.DesiredState
	activeOK bool
}

// entryLocked returns k's entry, creating it.
func (c *instanceCache) entryLocked(k svcKey) *cachedService {
	if c.svcs == nil {
		c.svcs = map[svcKey]*cachedService{}
	}
	e := c.svcs[k]
	if e == nil {
		e = &cachedService{}
		c.svcs[k] = e
	}
	return e
}

// list returns a copy of the cached instances of a service, or ok false
// with the generation to pass to fill after reading the database.
func (c *instanceCache) list(app, svc string) (out []store.Instance, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(svcKey{app, svc})
	if !e.ok || e.pending > 0 || c.importing > 0 {
		return nil, e.gen, false
	}
	out = make([]store.Instance, len(e.list))
	for i := range e.list {
		in, err := e.list[i].unpack()
		if err != nil {
			c.dropLocked(e)
			return nil, e.gen, false
		}
		out[i] = in
	}
	return out, 0, true
}

// get returns a copy of one cached instance; known says the service is
// cached (found false then means there is no such instance).
func (c *instanceCache) get(app, svc, rc string) (inst store.Instance, found, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.svcs[svcKey{app, svc}]
	if e == nil || !e.ok || e.pending > 0 || c.importing > 0 {
		return store.Instance{}, false, false
	}
	i, ok := findChannel(e.list, rc)
	if !ok {
		return store.Instance{}, false, true
	}
	in, err := e.list[i].unpack()
	if err != nil {
		c.dropLocked(e)
		return store.Instance{}, false, false
	}
	return in, true, true
}

// at returns the cached row of an instance if it is at revision rev, for a
// write transaction (whose commits are the only ones: no commit is under
// way while it runs).
func (c *instanceCache) at(app, svc, rc string, rev int64) (store.Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.svcs[svcKey{app, svc}]
	if e == nil || !e.ok || e.pending > 0 || c.importing > 0 {
		return store.Instance{}, false
	}
	i, ok := findChannel(e.list, rc)
	if !ok || e.list[i].rev != rev {
		return store.Instance{}, false
	}
	in, err := e.list[i].unpack()
	if err != nil {
		c.dropLocked(e)
		return store.Instance{}, false
	}
	return in, true
}

// activeState returns a copy of the cached active desired state of a
// service, or ok false with the generation to pass to fillActive.
func (c *instanceCache) activeState(app, svc string) (store.DesiredState, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(svcKey{app, svc})
	if !e.activeOK || e.pending > 0 || c.importing > 0 {
		return store.DesiredState{}, e.gen, false
	}
	return cloneDesiredState(e.active), 0, true
}

// fillActive caches rec, read from the database, unless a write to the
// service committed since gen was taken.
func (c *instanceCache) fillActive(app, svc string, gen uint64, rec store.DesiredState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(svcKey{app, svc})
	if e.gen != gen || e.pending > 0 || c.importing > 0 {
		return
	}
	e.active, e.activeOK = cloneDesiredState(rec), true
}

func cloneDesiredState(d store.DesiredState) store.DesiredState {
	d.Compiled = slices.Clone(d.Compiled)
	d.Params = slices.Clone(d.Params)
	d.ReleaseChannels = slices.Clone(d.ReleaseChannels)
	return d
}

// fill caches list, read from the database, unless a write to the service
// committed since gen was taken.
func (c *instanceCache) fill(app, svc string, gen uint64, list []store.Instance) {
	rows := make([]packedRow, len(list))
	for i := range list {
		rows[i] = packRow(&list[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(svcKey{app, svc})
	if e.gen != gen || e.ok || e.pending > 0 || c.importing > 0 {
		return
	}
	c.makeRoomLocked(len(list))
	e.list, e.ok = rows, true
	c.held += len(list)
}

// makeRoomLocked drops cached services until n more instances fit.
func (c *instanceCache) makeRoomLocked(n int) {
	limit := c.limit
	if limit <= 0 {
		limit = cacheLimit
	}
	for _, e := range c.svcs {
		if c.held+n <= limit {
			return
		}
		c.dropLocked(e)
	}
}

// committing marks the services a commit writes as changing: reads go to
// the file until done.
func (c *instanceCache) committing(w *instWrites) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range append(w.touched[:len(w.touched):len(w.touched)], w.replaced...) {
		e := c.entryLocked(k)
		e.pending++
		e.gen++
	}
	if w.all {
		c.importing++
		c.imports.Add(1)
	}
}

// done ends a commit marked by committing: committed, its rows are taken
// in; else what it touched is dropped (what the file holds is unsure).
func (c *instanceCache) done(w *instWrites, committed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range w.touched {
		e := c.entryLocked(k)
		e.pending--
		e.gen++
		if !committed {
			c.dropLocked(e)
		}
	}
	for _, k := range w.replaced {
		e := c.entryLocked(k)
		e.pending--
		e.gen++
		e.active, e.activeOK = store.DesiredState{}, false
	}
	if w.all {
		c.importing--
		c.imports.Add(1)
		for _, e := range c.svcs {
			e.gen++
			c.dropLocked(e)
			e.active, e.activeOK = store.DesiredState{}, false
		}
		return
	}
	if !committed {
		return
	}
	for _, in := range w.written {
		e := c.entryLocked(svcKey{in.Application, in.Service})
		if !e.ok {
			continue
		}
		row := packRow(&in)
		if i, ok := findChannel(e.list, in.ReleaseChannel); ok {
			e.list[i] = row
			continue
		}
		c.makeRoomLocked(1)
		if !e.ok { // dropped to make room
			continue
		}
		// A new instance: the list is copied to its exact size (growing
		// it in place would keep spare room in every service's list).
		i, _ := findChannel(e.list, in.ReleaseChannel)
		list := make([]packedRow, 0, len(e.list)+1)
		list = append(append(append(list, e.list[:i]...), row), e.list[i:]...)
		e.list = list
		c.held++
	}
}

func (c *instanceCache) dropLocked(e *cachedService) {
	if e.ok {
		c.held -= len(e.list)
		e.list, e.ok = nil, false
	}
}

// instWrites are the instance writes of a write transaction, for the cache
// once it commits.
type instWrites struct {
	// written are the rows written, as stored.
	written []store.Instance
	// touched are the services whose instances were written to.
	touched []svcKey
	// replaced are the services whose active desired state changed.
	replaced []svcKey
	// all says every service may have changed (an import).
	all bool
}

// mark and rollback drop what a request rolled back to its savepoint wrote.
func (w *instWrites) mark() [3]int { return [3]int{len(w.written), len(w.touched), len(w.replaced)} }

func (w *instWrites) rollback(m [3]int) {
	w.written, w.touched, w.replaced = w.written[:m[0]], w.touched[:m[1]], w.replaced[:m[2]]
}

// findChannel returns the index of release channel rc in list (ordered by
// release channel), or where it would go.
func findChannel(list []packedRow, rc string) (int, bool) {
	return slices.BinarySearchFunc(list, rc, func(r packedRow, rc string) int {
		return strings.Compare(r.rc, rc)
	})
}

// storedTime is t as a time column reads back: UTC, to the nanosecond (the
// column keeps nine digits), without a monotonic reading; the zero time
// whatever its location.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

// storedAsIs reports whether list reads back from its column (dbStrings)
// as it is: JSON keeps every valid UTF-8 string, and an empty list reads
// back as nil.
func storedAsIs(list []string) bool {
	for _, s := range list {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// storedInstance is in as putInstance stores it, read back: revision
// raised, UpdatedAt set, times and lists through their column encodings.
func storedInstance(in store.Instance, updatedAt time.Time) (store.Instance, error) {
	out := in
	out.UpdatedAt = updatedAt
	out.Revision = in.Revision + 1
	for _, t := range []*time.Time{&out.LastApplyAt, &out.ConvergedAt, &out.UpdatedAt, &out.AppliedAt} {
		*t = storedTime(*t)
	}
	out.Satisfied, out.Checks = nil, nil
	switch {
	case len(in.Satisfied) == 0:
		// An empty list reads back as nil.
	case storedAsIs(in.Satisfied):
		// The column reads back the same strings: no need to decode them
		// from their JSON again.
		out.Satisfied = slices.Clone(in.Satisfied)
	default:
		if err := (scanJSON{V: &out.Satisfied}).Scan(dbStrings(in.Satisfied)); err != nil {
			return store.Instance{}, err
		}
	}
	if err := (scanJSON{V: &out.Checks}).Scan(dbChecks(in.Checks)); err != nil {
		return store.Instance{}, err
	}
	return out, nil
}
