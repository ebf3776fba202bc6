package sqlite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// The open-task cache answers as the file does after any sequence of
// enqueues (claimed or not, refused as duplicates), claims, releases,
// completions (in a batch or alone, by the right claim or a stale one, from
// a copy naming another key) and claim resets, and after the store is
// reopened.
func TestOpenTasksCacheMatchesFile(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(7, 8))
	keys := []string{"shop/web", "shop/api", "shop/db"}
	insts := []string{"staging", "prod", "prod/check"}
	fromFile := func(s *Store, key string) []string {
		t.Helper()
		out, err := queryAll(ctx, s.reads, "SELECT instance FROM tasks WHERE key = ? AND status IN ('pending', 'running')", []any{key},
			func(row interface{ Scan(...any) error }) (string, error) {
				var inst string
				return inst, row.Scan(&inst)
			})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	check := func(s *Store, step int, what string) {
		t.Helper()
		for _, key := range keys {
			got, err := s.OpenTaskInstances(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if want := fromFile(s, key); !slices.Equal(got, want) {
				t.Fatalf("step %d (%s): open tasks of %s %v, the file says %v", step, what, key, got, want)
			}
		}
	}
	var held []store.Task // claimed tasks, some stale
	for step := range 400 {
		var what string
		switch r.IntN(6) {
		case 0, 1:
			b := &store.Batch{}
			for range 1 + r.IntN(2) {
				b.Tasks = append(b.Tasks, store.Task{Key: keys[r.IntN(len(keys))], Instance: insts[r.IntN(len(insts))], Kind: "engine.apply", Payload: []byte(`{}`)})
			}
			if r.IntN(2) == 0 {
				b.Claim = &store.TaskClaim{Owner: "me", TTL: time.Minute}
			}
			err := s.Write(ctx, b)
			what = fmt.Sprintf("enqueue %d (claimed %v): %v", len(b.Tasks), b.Claim != nil, err)
			if err == nil && b.Claim != nil {
				held = append(held, b.Tasks...)
			}
		case 2:
			got, err := s.ClaimTasks(ctx, "me", time.Minute, 1+r.IntN(3))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, got...)
			what = fmt.Sprintf("claim %d", len(got))
		case 3:
			if len(held) == 0 {
				continue
			}
			i := r.IntN(len(held))
			task := held[i]
			status := []store.TaskStatus{store.TaskSucceeded, store.TaskFailed}[r.IntN(2)]
			if r.IntN(4) == 0 {
				// A caller's copy naming another key: the task is its id.
				task.Key = keys[(slices.Index(keys, task.Key)+1)%len(keys)]
			}
			var err error
			if r.IntN(2) == 0 {
				err = s.Write(ctx, &store.Batch{Complete: []store.TaskDone{{Task: task, Status: status}}})
			} else {
				err = s.CompleteTask(ctx, task, status, "done", nil)
			}
			what = fmt.Sprintf("complete %d: %v", task.ID, err)
			held = slices.Delete(held, i, i+1)
		case 4:
			if len(held) == 0 {
				continue
			}
			i := r.IntN(len(held))
			err := s.ReleaseTask(ctx, held[i], "handed back", nil)
			what = fmt.Sprintf("release %d: %v", held[i].ID, err)
			held = slices.Delete(held, i, i+1)
		case 5:
			if r.IntN(4) != 0 {
				continue
			}
			if err := s.ResetClaims(ctx); err != nil {
				t.Fatal(err)
			}
			what = "reset claims" // the held claims are stale now
		}
		check(s, step, what)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s2.Close() }()
	check(s2, -1, "reopened, before any write")
	if err := s2.AppendEvents(ctx, store.Event{Application: "shop", Service: "web", Type: "pushed", Message: "m"}); err != nil {
		t.Fatal(err)
	}
	check(s2, -1, "reopened, after a write loaded the cache")
}
