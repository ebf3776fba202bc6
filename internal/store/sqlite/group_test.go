package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestGroupCommitKeepsEachWriteApart: many writers at once are committed in
// groups, yet each write is all or nothing on its own: one that fails (or
// panics, or was canceled) writes nothing and gets its error; the others
// commit.
func TestGroupCommitKeepsEachWriteApart(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	if err := s.writeTx(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE g (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	errOdd := errors.New("odd writes fail after writing")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	const writers = 200
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			wctx, d := ctx, crashSafe
			switch {
			case i%10 == 0:
				d = durable
			case i%25 == 7:
				wctx = canceled
			}
			errs[i] = s.writeTxMode(wctx, d, func(tx *wtx) error {
				for j := range 3 {
					if _, err := tx.ExecContext(wctx, "INSERT INTO g (k, v) VALUES (?, ?)", fmt.Sprintf("w%03d-%d", i, j), i); err != nil {
						return err
					}
				}
				switch {
				case i%3 == 1:
					return errOdd
				case i%50 == 5:
					panic("a bug in one write")
				}
				return nil
			})
		})
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		switch {
		case i%25 == 7:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("write %d with a canceled context: %v", i, err)
			}
		case i%3 == 1:
			if !errors.Is(err, errOdd) {
				t.Errorf("write %d: %v, want its own error", i, err)
			}
		case i%50 == 5:
			if err == nil {
				t.Errorf("write %d panicked without an error", i)
			}
		default:
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
			want++
		}
	}
	var n int
	if err := s.read.QueryRowContext(ctx, "SELECT COUNT(*) FROM g").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3*want {
		t.Errorf("%d rows, want %d (3 for each of the %d writes that succeeded)", n, 3*want, want)
	}
	rows, err := s.read.QueryContext(ctx, "SELECT v, COUNT(*) FROM g GROUP BY v")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var v, c int
		if err := rows.Scan(&v, &c); err != nil {
			t.Fatal(err)
		}
		if c != 3 || v%3 == 1 || v%25 == 7 || v%50 == 5 {
			t.Errorf("write %d left %d rows", v, c)
		}
	}
}

// TestGroupCommitIgnoresContextsOnceRunning: a request whose context ends
// while its group runs neither fails its own statements nor interrupts the
// others' (they share one connection, which the driver would interrupt):
// every write of the group commits.
func TestGroupCommitIgnoresContextsOnceRunning(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	if err := s.writeTx(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE c (k INTEGER PRIMARY KEY)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const writers = 100
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			errs[i] = s.writeTxMode(wctx, crashSafe, func(tx *wtx) error {
				if i%2 == 0 {
					cancel() // its caller gives up while the group runs
				}
				for j := range 20 {
					if _, err := tx.ExecContext(wctx, "INSERT INTO c (k) VALUES (?)", i*100+j); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	var n int
	if err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM c").Scan(&n); err != nil || n != writers*20 {
		t.Errorf("%d rows (%v), want %d", n, err, writers*20)
	}
}

// TestGroupRunsRerunnableWritesBare: the requests that may run again share
// the group's transaction without savepoints. When one of them fails, the
// group runs again with a savepoint for each: every request still gets its
// own answer, only the ones that succeeded are written, and only the
// rerunnable requests ran twice.
func TestGroupRunsRerunnableWritesBare(t *testing.T) {
	t.Parallel()
	for _, bareFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("bareFails=%v", bareFails), func(t *testing.T) {
			t.Parallel()
			s, _ := openTemp(t)
			t.Cleanup(func() { _ = s.Close() })
			ctx := t.Context()
			if err := s.writeTx(ctx, func(tx *wtx) error {
				_, err := tx.ExecContext(ctx, "CREATE TABLE r (k TEXT PRIMARY KEY)")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			// A write holds the writer while the others queue, so that they
			// are committed as one group.
			started, release, blockerDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				blockerDone <- s.writeTxMode(ctx, crashSafe, func(*wtx) error {
					close(started)
					<-release
					return nil
				})
			}()
			<-started
			const writers = 8
			errWrite := errors.New("this write fails after writing")
			fails := func(i int) bool { return i == 1 || (bareFails && i == 4) }
			var (
				wg   sync.WaitGroup
				runs [writers]atomic.Int32
				errs [writers]error
			)
			for i := range writers {
				rerun := i >= writers/2
				wg.Go(func() {
					fn := func(tx *wtx) error {
						runs[i].Add(1)
						for j := range 3 {
							if _, err := tx.ExecContext(ctx, "INSERT INTO r (k) VALUES (?)", fmt.Sprintf("w%d-%d", i, j)); err != nil {
								return err
							}
						}
						if fails(i) {
							return errWrite
						}
						return nil
					}
					if rerun {
						errs[i] = s.writeTxRerun(ctx, crashSafe, fn)
					} else {
						errs[i] = s.writeTxMode(ctx, crashSafe, fn)
					}
				})
			}
			for queued := 0; queued < writers; {
				s.group.mu.Lock()
				queued = len(s.group.queue)
				s.group.mu.Unlock()
				runtime.Gosched()
			}
			close(release)
			wg.Wait()
			if err := <-blockerDone; err != nil {
				t.Fatal(err)
			}
			want := 0
			for i := range writers {
				if fails(i) {
					if !errors.Is(errs[i], errWrite) {
						t.Errorf("write %d: %v, want its own error", i, errs[i])
					}
				} else {
					if errs[i] != nil {
						t.Errorf("write %d: %v", i, errs[i])
					}
					want += 3
				}
				// With a bare write failing, the group runs again: the
				// failing write and those before it ran bare, were
				// rolled back, and ran again in a savepoint.
				got := runs[i].Load()
				switch {
				case bareFails && i == 4 && got != 2:
					t.Errorf("write %d ran %d times, want 2", i, got)
				case bareFails && i >= writers/2 && (got < 1 || got > 2):
					t.Errorf("write %d ran %d times, want 1 or 2", i, got)
				case (!bareFails || i < writers/2) && got != 1:
					t.Errorf("write %d ran %d times, want once", i, got)
				}
			}
			var n int
			if err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM r").Scan(&n); err != nil || n != want {
				t.Errorf("%d rows (%v), want %d", n, err, want)
			}
			var failed int
			if err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM r WHERE k LIKE 'w1-%' OR k LIKE 'w4-%'").Scan(&failed); err != nil || (failed != 0 && bareFails) || (failed != 3 && !bareFails) {
				t.Errorf("%d rows of writes 1 and 4 (%v)", failed, err)
			}
		})
	}
}
