package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// Group commit: write transactions that arrive while one commits are queued
// and committed together, as one SQLite transaction, by the first of them
// (the leader). Each keeps its own all-or-nothing meaning: it runs inside a
// savepoint, and one that fails is rolled back to it alone and gets its
// error, while the others commit. A commit that fails fails every request of
// the group (none of them is written). The group commits with
// synchronous=FULL when any of its requests is durable.
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
func (s *Store) commitGroup(reqs []*writeReq) {
	live := reqs[:0:0]
	mode := "NORMAL"
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.finish(err) // canceled while queued: nothing was written
			continue
		}
		live = append(live, r)
		if r.d == durable {
			mode = "FULL"
		}
	}
	if len(live) == 0 {
		return
	}
	var wt *wtx
	failAll := func(err error) {
		// The transaction is rolled back: the cache never saw its rows.
		err = s.health.wrote(err)
		for _, r := range live {
			r.finish(err)
		}
	}
	// The group outlives any one caller's context, and its statements run
	// under the group's (see wtx): a request canceled before its group
	// started was not run above; once running, it completes.
	ctx := context.Background()
	conn, err := s.write.Conn(ctx)
	if err != nil {
		failAll(err)
		return
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
			failAll(err)
			return
		}
		s.syncConn, s.syncMode = driverConn, mode
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		failAll(err)
		return
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
		if _, err := wt.ExecContext(ctx, "SAVEPOINT w"); err != nil {
			_ = tx.Rollback()
			failAll(err)
			return
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
				failAll(errors.Join(errs[i], err))
				return
			}
		}
		if _, err := wt.ExecContext(ctx, "RELEASE w"); err != nil {
			_ = tx.Rollback()
			failAll(errors.Join(errs[i], err))
			return
		}
	}
	// Refuse to acknowledge a write into a database file that was removed
	// or replaced: nobody would ever read it again (B4).
	if err := s.health.checkFiles(); err != nil {
		_ = tx.Rollback()
		for _, r := range live {
			r.finish(err)
		}
		return
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
		return
	}
	s.ckpt.committed()
	for i, r := range live {
		r.finish(s.health.wrote(errs[i]))
	}
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
