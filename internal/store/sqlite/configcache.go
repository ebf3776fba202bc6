package sqlite

import (
	"cmp"
	"slices"
	"sync"

	"github.com/drover-dev/drover/internal/store"
)

// configCache holds the latest version of every config, opened, once it was
// loaded: every push reads its application, its service and the configs of
// every other kind (runtimes, release channels, …), and reading them from
// the file meant a query with a sub-select per config and opening each
// sealed body again, a quarter of a push's CPU time. Configs change only
// through this process (PutConfig, Import; Reseal changes how bodies are
// sealed, not what they hold), which keeps the cache exact:
//
//   - while a write of configs is under way (pending), reads go to the file,
//     which may already hold it;
//   - a write that succeeded puts its version in; one that failed, or an
//     import, empties the cache, which the next read loads again;
//   - a load fills the cache only if no write began since it started
//     reading (gen).
//
// Objects are copied out, so callers may keep and change what they get.
type configCache struct {
	mu sync.Mutex
	// byKind holds the latest version of every config by kind and name,
	// when ok.
	byKind  map[string]map[string]store.ConfigObject
	ok      bool
	loading bool
	pending int
	gen     uint64
}

// startLoad says whether the caller should load the cache (it is empty,
// no write of configs is under way and no other load runs), and the
// generation to pass to endLoad.
func (c *configCache) startLoad() (gen uint64, load bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok || c.pending > 0 || c.loading {
		return 0, false
	}
	c.loading = true
	return c.gen, true
}

// endLoad ends a load: all (the latest version of every config, opened)
// fills the cache unless the load failed or a write began since gen.
func (c *configCache) endLoad(gen uint64, all []store.ConfigObject, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loading = false
	if err != nil || c.gen != gen || c.pending > 0 {
		return
	}
	c.byKind = map[string]map[string]store.ConfigObject{}
	for _, obj := range all {
		c.putLocked(obj)
	}
	c.ok = true
}

func (c *configCache) putLocked(obj store.ConfigObject) {
	names := c.byKind[obj.Kind]
	if names == nil {
		names = map[string]store.ConfigObject{}
		c.byKind[obj.Kind] = names
	}
	if cur, ok := names[obj.Name]; !ok || cur.Version < obj.Version {
		obj.Body = slices.Clone(obj.Body)
		names[obj.Name] = obj
	}
}

// get returns the latest version of a config: found says whether it
// exists, known whether the cache could tell.
func (c *configCache) get(kind, name string) (obj store.ConfigObject, found, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok || c.pending > 0 {
		return store.ConfigObject{}, false, false
	}
	obj, found = c.byKind[kind][name]
	obj.Body = slices.Clone(obj.Body)
	return obj, found, true
}

// list returns the latest version of every config of kinds (every kind
// when none is given), ordered by kind and name, or ok false when the
// cache cannot tell.
func (c *configCache) list(kinds []string) (out []store.ConfigObject, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok || c.pending > 0 {
		return nil, false
	}
	add := func(names map[string]store.ConfigObject) {
		for _, obj := range names {
			obj.Body = slices.Clone(obj.Body)
			out = append(out, obj)
		}
	}
	if len(kinds) == 0 {
		for _, names := range c.byKind {
			add(names)
		}
	} else {
		for _, k := range kinds {
			add(c.byKind[k])
		}
	}
	slices.SortFunc(out, func(a, b store.ConfigObject) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out, true
}

// writing marks a write of configs as under way; the function it returns
// ends it, with the latest versions of the configs written and the write's
// error. An import, which may write any config, ends with nil.
func (c *configCache) writing() func(written []store.ConfigObject, err error) {
	c.mu.Lock()
	c.pending++
	c.gen++
	c.mu.Unlock()
	return func(written []store.ConfigObject, err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.pending--
		c.gen++
		switch {
		case !c.ok:
		case err != nil || written == nil:
			c.byKind, c.ok = nil, false
		default:
			for _, obj := range written {
				c.putLocked(obj)
			}
		}
	}
}
