package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
)

// Group commit: write transactions that arrive while one commits are queued
// and committed together, as one SQLite transaction, by the first of them
// (the leader). Each keeps its own all-or-nothing meaning: one that fails is
// rolled back alone and gets its error, while the others commit (see
// commitGroup for how: a savepoint each, or a rerun of the group). A commit
// that fails fails every request of the group (none of them is written).
// The group commits with synchronous=FULL when any of its requests is
// durable.
//
// The cost of a commit (BEGIN, the WAL frames of the pages touched, the
// file checks, COMMIT, an fsync for durable writes) is paid once per group:
// under load, when many goroutines write at once, that is what lets the
// engine's many small transactions share one. Alone, a write commits as
// before.

// writeReq is one write transaction waiting for its commit.
type writeReq struct {
	ctx  context.Context
	d    durability
	fn   func(tx *wtx) error
	err  error
	done chan struct{}
	// lead tells a queued request that it leads the next group.
	lead chan struct{}
	// rerun says fn may run again (see writeTxRerun).
	rerun bool
}

// group is the queue of write requests.
type group struct {
	mu      sync.Mutex
	queue   []*writeReq
	leading bool
}

// maxGroup bounds the requests committed together, so one group's commit
// does not keep its first request waiting for long.
const maxGroup = 256

// run queues r and returns once it has been committed (or failed). The
// first request to find no leader leads: it commits groups until its own is
// done, then hands the lead to the next queued request.
func (g *group) run(ctx context.Context, s *Store, r *writeReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.done, r.lead = make(chan struct{}), make(chan struct{}, 1)
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if g.leading {
		g.mu.Unlock()
		select {
		case <-r.done:
			return r.err
		case <-r.lead:
		}
		g.mu.Lock()
	}
	g.leading = true
	for {
		n := min(len(g.queue), maxGroup)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		s.commitGroup(batch)
		s.wstmts.prepareMissed(context.Background(), s.write)
		g.mu.Lock()
		select {
		case <-r.done:
		default:
			continue // r waits in the queue still (the group was full)
		}
		if len(g.queue) > 0 {
			g.queue[0].lead <- struct{}{} // it leads now; leading stays set
		} else {
			g.leading = false
			g.queue = nil
		}
		g.mu.Unlock()
		return r.err
	}
}

// finish ends r with err.
func (r *writeReq) finish(err error) {
	r.err = err
	close(r.done)
}

// commitGroup runs the requests in one transaction and ends each.
//
// A savepoint for each request, so that one can fail alone, costs SQLite a
// copy of every page the request changes first (the savepoint's journal),
// and three statements. The requests that may run again (writeTxRerun)
// therefore run first, with no savepoint: should one of them fail, the
// transaction is rolled back and the group runs again with a savepoint for
// every request. A group of one request needs none either: if it fails,
// the transaction is rolled back and that is its answer.
func (s *Store) commitGroup(reqs []*writeReq) {
	live := reqs[:0:0]
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.finish(err) // canceled while queued: nothing was written
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// Requests of one group are concurrent (none has been answered), so
	// any order of them is one they could have committed in.
	slices.SortStableFunc(live, func(a, b *writeReq) int {
		switch {
		case a.rerun == b.rerun:
			return 0
		case a.rerun:
			return -1
		default:
			return 1
		}
	})
	bare := 0
	for bare < len(live) && live[bare].rerun {
		bare++
	}
	if len(live) == 1 {
		bare = 1
	}
	if bare > 0 && s.runGroup(live, bare) {
		return
	}
	s.runGroup(live, 0)
}

// runGroup runs live in one transaction, the first bare of them without a
// savepoint, and ends each. It returns false, having ended none and written
// nothing, when one of the bare requests of a group of several failed: the
// caller then runs the group again with a savepoint for each.
func (s *Store) runGroup(live []*writeReq, bare int) bool {
	mode := "NORMAL"
	if slices.ContainsFunc(live, func(r *writeReq) bool { return r.d == durable }) {
		mode = "FULL"
	}
	var wt *wtx
	failAll := func(err error) bool {
		// The transaction is rolled back: the cache never saw its rows.
		err = s.health.wrote(err)
		for _, r := range live {
			r.finish(err)
		}
		return true
	}
	// The group outlives any one caller's context, and its statements run
	// under the group's (see wtx): a request canceled before its group
	// started was not run above; once running, it completes.
	ctx := context.Background()
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return failAll(err)
	}
	defer func() { _ = conn.Close() }()
	// synchronous applies per connection and may change between
	// transactions: set it when it changes, and on a replaced connection,
	// which starts at the DSN's FULL.
	var driverConn any
	_ = conn.Raw(func(dc any) error { driverConn = dc; return nil })
	if driverConn != s.syncConn || mode != s.syncMode {
		s.syncConn, s.syncMode = nil, ""
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous="+mode); err != nil {
			return failAll(err)
		}
		s.syncConn, s.syncMode = driverConn, mode
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return failAll(err)
	}
	wt = s.newWtx(ctx, tx)
	// An invalid open-task cache is loaded in this transaction, so that
	// it and the notes of the requests below agree; a failed load leaves
	// it invalid.
	var loaded map[string][]openTask
	if s.openTasks.needsLoad() {
		loaded, _ = s.openTasks.load(ctx, wt)
	}
	errs := make([]error, len(live))
	for i, r := range live {
		if i < bare {
			if errs[i] = runFn(r.fn, wt); errs[i] != nil {
				// Nothing of the transaction is kept, nor any of its notes.
				_ = tx.Rollback()
				s.reuse(wt)
				if len(live) > 1 {
					return false
				}
				r.finish(s.health.wrote(errs[i]))
				return true
			}
			continue
		}
		if _, err := wt.ExecContext(ctx, "SAVEPOINT w"); err != nil {
			_ = tx.Rollback()
			return failAll(err)
		}
		mark, leaseMark, taskMark := wt.inst.mark(), len(wt.leases), len(wt.tasks)
		errs[i] = runFn(r.fn, wt)
		if errs[i] != nil {
			wt.inst.rollback(mark)
			wt.leases, wt.tasks = wt.leases[:leaseMark], wt.tasks[:taskMark]
			// SQLite rolls a whole transaction back on some errors (a full
			// disk, I/O): then the savepoint is gone with what the group
			// wrote so far, and the group fails.
			if _, err := wt.ExecContext(ctx, "ROLLBACK TO w"); err != nil {
				_ = tx.Rollback()
				return failAll(errors.Join(errs[i], err))
			}
		}
		if _, err := wt.ExecContext(ctx, "RELEASE w"); err != nil {
			_ = tx.Rollback()
			return failAll(errors.Join(errs[i], err))
		}
	}
	// Refuse to acknowledge a write into a database file that was removed
	// or replaced: nobody would ever read it again (B4).
	if err := s.health.checkFiles(); err != nil {
		_ = tx.Rollback()
		for _, r := range live {
			r.finish(err)
		}
		return true
	}
	// From the commit until the cache has its rows, reads of the services
	// it writes go to the file.
	s.instances.committing(&wt.inst)
	err = s.health.wrote(tx.Commit())
	s.instances.done(&wt.inst, err == nil)
	if err == nil {
		s.leases.committed(wt.leases)
		s.openTasks.committed(loaded, wt.tasks)
	} else {
		s.leases.forget(wt.leases)
		s.openTasks.invalidate()
	}
	s.reuse(wt)
	if err != nil {
		for _, r := range live {
			r.finish(err)
		}
		return true
	}
	s.ckpt.committed()
	for i, r := range live {
		r.finish(s.health.wrote(errs[i]))
	}
	return true
}

// runFn runs one request's function, turning a panic into its error (it
// runs on the leader's goroutine, which must go on).
func runFn(fn func(*wtx) error, tx *wtx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(tx)
}
