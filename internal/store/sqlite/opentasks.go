package sqlite

import (
	"context"
	"slices"
	"sync"
)

// openTasks caches the open (pending or running) tasks of each key, which
// every pass of the engine asks for (OpenTaskInstances). The single writer
// keeps it exact, as leaseCache: a transaction notes the tasks it opens
// (insertTasks, Import) and those it finishes (finishTask), and the notes
// enter the cache once the transaction commits, before its requests are
// answered; a request rolled back to its savepoint drops its notes. The
// cache starts invalid, is loaded by the first group commit (in its
// transaction, so it and the notes agree), and becomes invalid again when a
// commit fails (it may or may not have committed); while invalid, reads go
// to the file. Reads take mu; only the group's leader writes.
type openTasks struct {
	mu    sync.Mutex
	valid bool
	byKey map[string][]openTask
}

type openTask struct {
	id       int64
	instance string
}

// taskNote is a task a transaction opened or finished.
type taskNote struct {
	key      string
	instance string
	id       int64
	open     bool
}

// instances returns the instances of key's open tasks, ok false while the
// cache is invalid.
func (c *openTasks) instances(key string) (out []string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.valid {
		return nil, false
	}
	for _, t := range c.byKey[key] {
		out = append(out, t.instance)
	}
	return out, true
}

// load reads every open task in tx, for reset once tx commits.
func (c *openTasks) load(ctx context.Context, tx *wtx) (map[string][]openTask, error) {
	rows, err := tx.QueryContext(ctx, "SELECT key, instance, id FROM tasks WHERE status IN ('pending', 'running') ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	all := map[string][]openTask{}
	for rows.Next() {
		var (
			key string
			t   openTask
		)
		if err := rows.Scan(&key, &t.instance, &t.id); err != nil {
			return nil, err
		}
		all[key] = append(all[key], t)
	}
	return all, rows.Err()
}

// committed takes in a committed transaction's notes, in order; loaded,
// unless nil, is what the transaction read before them (the cache is then
// valid).
func (c *openTasks) committed(loaded map[string][]openTask, notes []taskNote) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if loaded != nil {
		c.byKey, c.valid = loaded, true
	}
	if !c.valid {
		return
	}
	for _, n := range notes {
		if n.open {
			c.byKey[n.key] = append(c.byKey[n.key], openTask{id: n.id, instance: n.instance})
			continue
		}
		// A finished task is found by its id: under its note's key, else
		// (a caller's copy naming another key) under any.
		if !c.removeLocked(n.key, n.id) {
			for key := range c.byKey {
				if c.removeLocked(key, n.id) {
					break
				}
			}
		}
	}
}

// removeLocked removes task id from key's open tasks, reporting whether it
// was there.
func (c *openTasks) removeLocked(key string, id int64) bool {
	list := c.byKey[key]
	i := slices.IndexFunc(list, func(t openTask) bool { return t.id == id })
	if i < 0 {
		return false
	}
	list = slices.Delete(list, i, i+1)
	if len(list) == 0 {
		delete(c.byKey, key)
	} else {
		c.byKey[key] = list
	}
	return true
}

// invalidate makes reads go to the file until a commit loads the cache
// again.
func (c *openTasks) invalidate() {
	c.mu.Lock()
	c.valid, c.byKey = false, nil
	c.mu.Unlock()
}

// needsLoad says whether the next group should load the cache.
func (c *openTasks) needsLoad() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.valid
}

// noteTask records that this transaction opened (open) or finished task id.
func (t *wtx) noteTask(key, instance string, id int64, open bool) {
	t.tasks = append(t.tasks, taskNote{key: key, instance: instance, id: id, open: open})
}
