package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// RunCache runs the cases of the cache role (store.Cache) against a store
// that has it: whatever the caches hold, reads answer what the database
// holds. open must return a new, empty store that implements store.Cache;
// the suite closes it when the subtest ends. Subtests run in parallel.
func RunCache(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, c store.Cache)
	}{
		{"Cache/ReadsSameAfterDrop", testCacheReadsSame},
		{"Cache/FailedWritesNotCached", testCacheFailedWrites},
		{"Cache/FenceAfterDrop", testCacheFence},
		{"Cache/ConcurrentDrops", testCacheConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			c, ok := s.(store.Cache)
			if !ok {
				t.Fatalf("%T does not implement store.Cache", s)
			}
			tc.fn(t, s, c)
		})
	}
}

// cachedView is what the caches serve: configs, the active desired state,
// instances and open tasks, read through the store.
type cachedView struct {
	Config    store.ConfigObject
	Configs   []store.ConfigObject
	Active    store.DesiredState
	Actives   []store.DesiredState
	Instances []store.Instance
	Instance  store.Instance
	Open      []string
}

func readView(t *testing.T, s store.Store) cachedView {
	t.Helper()
	ctx := t.Context()
	var v cachedView
	var err error
	v.Config, err = s.GetConfig(ctx, "service", "shop/web")
	must(t, err)
	v.Configs, err = s.ListConfigs(ctx)
	must(t, err)
	v.Active, err = s.ActiveDesiredState(ctx, "shop", "web")
	must(t, err)
	v.Actives, err = s.ListActiveDesiredStates(ctx)
	must(t, err)
	v.Instances, err = s.ListInstances(ctx, "shop", "web")
	must(t, err)
	v.Instance, err = s.GetInstance(ctx, "shop", "web", "production")
	must(t, err)
	v.Open, err = s.OpenTaskInstances(ctx, "shop/web")
	must(t, err)
	return v
}

// seedCached writes one of every record the caches keep and reads them
// once (filling the caches).
func seedCached(t *testing.T, s store.Store) cachedView {
	t.Helper()
	ctx := t.Context()
	_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"v":1}`), Hash: "h1"})
	must(t, err)
	_, _, err = s.PutConfig(ctx, store.ConfigObject{Kind: "runtime", Name: "local", Body: []byte(`{"r":1}`), Hash: "r1"})
	must(t, err)
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	create(t, s, desiredState("ds-2", "shop", "web", 2))
	write(t, s, instance("shop", "web", "production"), instance("shop", "web", "canary"))
	must(t, s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "production", Kind: "apply"}}}))
	return readView(t, s)
}

func drop(t *testing.T, c store.Cache) {
	t.Helper()
	must(t, c.DropCaches(t.Context()))
}

func testCacheReadsSame(t *testing.T, s store.Store, c store.Cache) {
	ctx := t.Context()
	warm := seedCached(t, s)
	drop(t, c)
	same(t, readView(t, s), warm, "reads after DropCaches")

	// A write into warm caches reads back as the database holds it.
	in := warm.Instance
	in.Message = "while cached"
	write(t, s, in)
	_, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"v":1.5}`), Hash: "h1.5"})
	must(t, err)
	warm = readView(t, s)
	if warm.Instance.Message != "while cached" || warm.Config.Hash != "h1.5" {
		t.Errorf("reads after writes into warm caches: instance %q, config %q", warm.Instance.Message, warm.Config.Hash)
	}
	drop(t, c)
	same(t, readView(t, s), warm, "reads after writes into warm caches and DropCaches")

	// Writes after a drop show at once, through the caches filled again.
	drop(t, c)
	_, _, err = s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"v":2}`), Hash: "h2"})
	must(t, err)
	create(t, s, desiredState("ds-3", "shop", "web", 3))
	in = warm.Instance
	in.Status, in.Message = "changed", "after a drop"
	write(t, s, in)
	got := readView(t, s)
	if got.Config.Version != 3 || string(got.Config.Body) != `{"v":2}` {
		t.Errorf("config after a drop and a put = version %d %s, want version 3", got.Config.Version, got.Config.Body)
	}
	if got.Active.ID != "ds-3" {
		t.Errorf("active desired state after a drop and a push = %s, want ds-3", got.Active.ID)
	}
	if got.Instance.Message != "after a drop" || got.Instance.Revision != warm.Instance.Revision+1 {
		t.Errorf("instance after a drop and a write = %+v", got.Instance)
	}
	drop(t, c)
	same(t, readView(t, s), got, "reads after a second DropCaches")
}

func testCacheFailedWrites(t *testing.T, s store.Store, c store.Cache) {
	ctx := t.Context()
	warm := seedCached(t, s)
	stale := warm.Instance
	stale.Revision--
	stale.Message = "stale"
	b := &store.Batch{
		Instances: []store.Instance{stale},
		Tasks:     []store.Task{{Key: "shop/web", Instance: "canary", Kind: "apply"}},
	}
	wantErr(t, s.Write(ctx, b), store.ErrConflict, "Write of a stale instance")
	// A second open task of one instance fails the batch: nothing of it is
	// cached.
	dup := &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "production", Kind: "apply"}}}
	wantErr(t, s.Write(ctx, dup), store.ErrConflict, "Write of a second open task")
	same(t, readView(t, s), warm, "reads after failed writes")
	drop(t, c)
	same(t, readView(t, s), warm, "reads after failed writes and DropCaches")
}

func testCacheFence(t *testing.T, s store.Store, c store.Cache) {
	ctx := t.Context()
	a, err := s.ClaimLease(ctx, "shop/web", "engine-a", time.Minute)
	must(t, err)
	fenced := func(l store.Lease) error {
		return s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: l.Key, Token: l.Token}, Events: []store.Event{ev("shop", "web", "fenced")}})
	}
	must(t, fenced(a))
	drop(t, c)
	must(t, fenced(a))
	must(t, s.ReleaseLease(ctx, a))
	b, err := s.ClaimLease(ctx, "shop/web", "engine-b", time.Minute)
	must(t, err)
	if b.Token <= a.Token {
		t.Fatalf("token after a drop and a new claim = %d, want more than %d", b.Token, a.Token)
	}
	wantErr(t, fenced(a), store.ErrFenced, "write fenced by a released lease")
	drop(t, c)
	wantErr(t, fenced(a), store.ErrFenced, "write fenced by a released lease, after DropCaches")
	must(t, fenced(b))
}

// testCacheConcurrent drops the caches while writers and readers work: no
// write is lost, and no reader sees a revision go back.
func testCacheConcurrent(t *testing.T, s store.Store, c store.Cache) {
	ctx := t.Context()
	const writers, writes = 4, 15
	var ins []store.Instance
	for i := range writers {
		ins = append(ins, instance("shop", "web", fmt.Sprintf("rc-%d", i)))
	}
	ins = write(t, s, ins...)
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		errs    = make(chan error, writers+2)
		writing sync.WaitGroup
	)
	for i := range writers {
		writing.Add(1)
		wg.Add(1)
		go func(in store.Instance) {
			defer wg.Done()
			defer writing.Done()
			for n := range writes {
				in.Message = fmt.Sprintf("write %d", n)
				b := &store.Batch{Instances: []store.Instance{in}}
				if err := s.Write(ctx, b); err != nil {
					errs <- fmt.Errorf("write %s %d: %w", in.ReleaseChannel, n, err)
					return
				}
				in = b.Instances[0]
			}
		}(ins[i])
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := c.DropCaches(ctx); err != nil && ctx.Err() == nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		seen := map[string]int64{}
		for ctx.Err() == nil {
			list, err := s.ListInstances(ctx, "shop", "web")
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					errs <- err
				}
				return
			}
			for _, in := range list {
				if in.Revision < seen[in.ReleaseChannel] {
					errs <- fmt.Errorf("%s: revision %d read after %d", in.ReleaseChannel, in.Revision, seen[in.ReleaseChannel])
					return
				}
				seen[in.ReleaseChannel] = in.Revision
			}
		}
	}()
	writing.Wait()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	drop(t, c)
	list, err := s.ListInstances(t.Context(), "shop", "web")
	must(t, err)
	for _, in := range list {
		if want := int64(1 + writes); in.Revision != want {
			t.Errorf("%s: revision %d after %d writes, want %d", in.ReleaseChannel, in.Revision, writes, want)
		}
	}
}
