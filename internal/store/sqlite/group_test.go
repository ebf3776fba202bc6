package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
