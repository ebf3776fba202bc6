package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// wtx is a write transaction that runs each query through a statement
// prepared once on the write connection, instead of parsing its SQL at every
// call: under the engine's load (several small write transactions per
// instance), parsing was a tenth of the process's CPU time.
//
// A query is prepared the first time it is seen, after the transaction that
// saw it (the write pool has a single connection, which the transaction
// holds); until then it runs unprepared. Queries are the store's constant
// strings, so the set stays small.
//
// Statements run under the group's context, not the one each request passes:
// the requests of a group share one connection, and the SQLite driver
// interrupts the connection when a statement's context ends, which would
// stop another request's statement (and roll the group's transaction back).
// A request whose context ended before its group started is not run (see
// commitGroup); once its group runs, it completes.
type wtx struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts *writeStmts
	// bound are the statements bound to tx so far (tx.StmtContext allocates).
	bound map[string]*sql.Stmt
	// inst are the instance writes, for the cache once committed.
	inst instWrites
	// leases are the lease tokens written or read, for leaseCache once
	// committed.
	leases     []leaseToken
	leaseCache *leaseCache
	// tasks are the tasks opened and finished, for openTasks once
	// committed.
	tasks []taskNote
}

// writeStmts are the statements prepared on the write connection.
type writeStmts struct {
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	missed map[string]struct{}
}

func (s *Store) newWtx(ctx context.Context, tx *sql.Tx) *wtx {
	t := &wtx{ctx: ctx, tx: tx, stmts: &s.wstmts, leaseCache: &s.leases, leases: s.leaseBuf[:0]}
	t.inst.written, t.inst.touched = s.instBuf.written[:0], s.instBuf.touched[:0]
	return t
}

// reuse keeps t's instance write lists for the next group's transaction
// (groups commit one at a time), once the cache has taken their rows.
func (s *Store) reuse(t *wtx) {
	if cap(t.leases) <= 4096 {
		clear(t.leases[:cap(t.leases)])
		s.leaseBuf = t.leases[:0]
	}
	if cap(t.inst.written) > 4096 || cap(t.inst.touched) > 4096 {
		s.instBuf = instWrites{} // an import's: not kept
		return
	}
	// Up to their capacity: rows a savepoint rolled back lie beyond len.
	clear(t.inst.written[:cap(t.inst.written)]) // holds no row's slices any longer
	clear(t.inst.touched[:cap(t.inst.touched)])
	s.instBuf.written, s.instBuf.touched = t.inst.written[:0], t.inst.touched[:0]
}

// stmt returns q bound to the transaction, or nil when q is not prepared yet
// (it is then noted for prepareMissed).
func (t *wtx) stmt(q string) *sql.Stmt {
	if st, ok := t.bound[q]; ok {
		return st
	}
	t.stmts.mu.Lock()
	st, ok := t.stmts.m[q]
	if !ok {
		if t.stmts.missed == nil {
			t.stmts.missed = make(map[string]struct{})
		}
		t.stmts.missed[q] = struct{}{}
	}
	t.stmts.mu.Unlock()
	if !ok {
		return nil
	}
	b := t.tx.StmtContext(t.ctx, st)
	if t.bound == nil {
		t.bound = make(map[string]*sql.Stmt)
	}
	t.bound[q] = b
	return b
}

// ExecContext is sql.Tx.ExecContext through the prepared statement of q,
// under the group's context (see wtx).
func (t *wtx) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.stmt(q); st != nil {
		return st.ExecContext(t.ctx, args...)
	}
	return t.tx.ExecContext(t.ctx, q, args...) //nolint:gosec // G701: q is one of the store's own statements (see wtx), never request input
}

// QueryContext is sql.Tx.QueryContext through the prepared statement of q,
// under the group's context (see wtx).
func (t *wtx) QueryContext(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(q); st != nil {
		return st.QueryContext(t.ctx, args...)
	}
	return t.tx.QueryContext(t.ctx, q, args...)
}

// QueryRowContext is sql.Tx.QueryRowContext through the prepared statement
// of q, under the group's context (see wtx).
func (t *wtx) QueryRowContext(_ context.Context, q string, args ...any) *sql.Row {
	if st := t.stmt(q); st != nil {
		return st.QueryRowContext(t.ctx, args...)
	}
	return t.tx.QueryRowContext(t.ctx, q, args...)
}

// prepareMissed prepares on db the queries transactions ran unprepared. It
// is called with the write connection free. A query that fails to prepare
// is left to run unprepared (and to report its error there).
func (w *writeStmts) prepareMissed(ctx context.Context, db *sql.DB) {
	w.mu.Lock()
	missed := w.missed
	w.missed = nil
	w.mu.Unlock()
	for q := range missed {
		w.mu.Lock()
		_, done := w.m[q]
		w.mu.Unlock()
		if done {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		w.mu.Lock()
		if w.m == nil {
			w.m = make(map[string]*sql.Stmt)
		}
		w.m[q] = st
		w.mu.Unlock()
	}
}

// close closes the prepared statements.
func (w *writeStmts) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	for q, st := range w.m {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = cerr
		}
		delete(w.m, q)
	}
	return err
}
