package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
)

// TestConfigCacheMatchesTheFile: writers put new versions of configs while
// readers list and get them; no reader ever sees a config go back to an
// older version, and once the writes are done every answer is the file's.
func TestConfigCacheMatchesTheFile(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	kinds := []string{"runtime", "releaseChannel", "service"}
	const writers, readers, rounds, names = 4, 4, 60, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for i := range rounds {
				kind, name := kinds[r.IntN(len(kinds))], fmt.Sprintf("c%d", r.IntN(names))
				body := fmt.Sprintf(`{"writer": %d, "round": %d}`, w, i)
				if _, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: kind, Name: name, Body: []byte(body), Hash: body}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for rd := range readers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(rd), 3))
			seen := map[string]int64{}
			saw := func(obj store.ConfigObject) {
				key := obj.Kind + "/" + obj.Name
				if obj.Version < seen[key] {
					t.Errorf("reader %d saw %s go back from version %d to %d", rd, key, seen[key], obj.Version)
				}
				seen[key] = obj.Version
			}
			for range rounds {
				if r.IntN(2) == 0 {
					list, err := s.ListConfigs(ctx, kinds[r.IntN(len(kinds))])
					if err != nil {
						t.Error(err)
						return
					}
					for _, obj := range list {
						saw(obj)
					}
					continue
				}
				obj, err := s.GetConfig(ctx, kinds[r.IntN(len(kinds))], fmt.Sprintf("c%d", r.IntN(names)))
				switch {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					t.Error(err)
					return
				default:
					saw(obj)
				}
			}
		})
	}
	wg.Wait()
	checkConfigsCached(t, s, kinds)
}

// checkConfigsCached checks that the cache answers, and as the file does.
func checkConfigsCached(t *testing.T, s *Store, kinds []string) {
	t.Helper()
	ctx := t.Context()
	file, err := s.listConfigsFile(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ListConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.configs.list(nil); !ok {
		t.Fatal("the cache does not answer after a read")
	}
	if !reflect.DeepEqual(got, file) {
		t.Errorf("ListConfigs() = %v, the file holds %v", got, file)
	}
	for _, k := range kinds {
		fileKind, err := s.listConfigsFile(ctx, []string{k})
		if err != nil {
			t.Fatal(err)
		}
		gotKind, err := s.ListConfigs(ctx, k)
		if err != nil || !reflect.DeepEqual(gotKind, fileKind) {
			t.Errorf("ListConfigs(%s) = %v, %v; the file holds %v", k, gotKind, err, fileKind)
		}
	}
	for _, obj := range file {
		got, err := s.GetConfig(ctx, obj.Kind, obj.Name)
		if err != nil || !reflect.DeepEqual(got, obj) {
			t.Errorf("GetConfig(%s, %s) = %v, %v; the file holds %v", obj.Kind, obj.Name, got, err, obj)
		}
	}
	// What a caller does with its copy stays with it.
	if len(file) > 0 {
		got, err := s.GetConfig(ctx, file[0].Kind, file[0].Name)
		if err != nil {
			t.Fatal(err)
		}
		got.Body[0] = 'X'
		again, err := s.GetConfig(ctx, file[0].Kind, file[0].Name)
		if err != nil || !reflect.DeepEqual(again, file[0]) {
			t.Errorf("after a caller changed its copy: %v, %v; want %v", again, err, file[0])
		}
	}
}

// TestConfigCacheFollowsImports: an import writes configs behind the
// cache's back; they are read once it committed.
func TestConfigCacheFollowsImports(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	if list, err := s.ListConfigs(ctx); err != nil || len(list) != 0 {
		t.Fatalf("configs of a new store: %v, %v", list, err)
	}
	if _, _, known := s.configs.get("runtime", "k8s"); !known {
		t.Fatal("the cache did not load the new store's (empty) configs")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.Import(ctx, records(dump.Config{Kind: "runtime", Name: "k8s", Version: 3, Body: []byte(`{"runtime": {}}`), Hash: "h", CreatedAt: at})); err != nil {
		t.Fatal(err)
	}
	obj, err := s.GetConfig(ctx, "runtime", "k8s")
	if err != nil || obj.Version != 3 {
		t.Fatalf("imported config: %v, %v; want version 3", obj, err)
	}
	checkConfigsCached(t, s, []string{"runtime"})
}

// TestPutConfigsAllOrNothing: a PutConfigs that fails in its transaction
// (here, the event of its second config panics) stores none of its configs
// nor events, and the config cache answers as the file does.
func TestPutConfigsAllOrNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	v1, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/api", Body: []byte(`{"a": 1}`), Hash: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListConfigs(ctx, "service"); err != nil { // the cache is loaded
		t.Fatal(err)
	}
	calls := 0
	_, err = s.PutConfigs(ctx, []store.ConfigObject{
		{Kind: "service", Name: "shop/web", Body: []byte(`{"w": 1}`), Hash: "w1"},
		{Kind: "service", Name: "shop/api", Body: []byte(`{"a": 2}`), Hash: "a2"},
	}, func(store.ConfigObject) store.Event {
		if calls++; calls == 2 {
			panic("boom")
		}
		return store.Event{Application: "shop", Type: "configured"}
	})
	if err == nil {
		t.Fatal("PutConfigs whose second event panicked succeeded")
	}
	if _, err := s.GetConfig(ctx, "service", "shop/web"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the first config of the failed call: %v, want not found", err)
	}
	got, err := s.GetConfig(ctx, "service", "shop/api")
	if err != nil || got.Version != v1.Version || got.Hash != "a1" {
		t.Errorf("the second config after the failed call: version %d hash %q %v; want version 1, a1", got.Version, got.Hash, err)
	}
	list, err := s.ListConfigs(ctx, "service")
	if err != nil || len(list) != 1 {
		t.Errorf("configs after the failed call: %v %v; want shop/api alone", list, err)
	}
	events, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil || len(events) != 0 {
		t.Errorf("events after the failed call: %v %v; want none", events, err)
	}
}
