package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/store"
)

const configColumns = "kind, name, version, body, hash, source, created_at"

func scanConfig(row interface{ Scan(...any) error }) (store.ConfigObject, error) {
	var c store.ConfigObject
	err := row.Scan(&c.Kind, &c.Name, &c.Version, &c.Body, &c.Hash, &c.Source, scanTime{&c.CreatedAt})
	return c, err
}

// PutConfig implements store.Store.
func (s *Store) PutConfig(ctx context.Context, obj store.ConfigObject) (store.ConfigObject, bool, error) {
	if err := obj.CheckPut(); err != nil {
		return store.ConfigObject{}, false, err
	}
	var res store.PutConfigResult
	written := s.configs.writing()
	err := s.writeTx(ctx, func(tx *wtx) error {
		var err error
		res, err = s.putConfig(ctx, tx, obj)
		return err
	})
	written([]store.ConfigObject{res.Config}, err)
	if err != nil {
		return store.ConfigObject{}, false, fmt.Errorf("put config %s/%s: %w", obj.Kind, obj.Name, err)
	}
	return res.Config, res.Created, nil
}

// PutConfigs implements store.Store.
func (s *Store) PutConfigs(ctx context.Context, objs []store.ConfigObject, onCreated func(store.ConfigObject) store.Event) ([]store.PutConfigResult, error) {
	if err := store.CheckPuts(objs); err != nil || len(objs) == 0 {
		return nil, err
	}
	var (
		out    []store.PutConfigResult
		events []store.Event
		seqs   []int64
		t      = now()
	)
	written := s.configs.writing()
	err := s.writeTx(ctx, func(tx *wtx) error {
		out, events = make([]store.PutConfigResult, 0, len(objs)), nil
		for _, obj := range objs {
			res, err := s.putConfig(ctx, tx, obj)
			if err != nil {
				return fmt.Errorf("put config %s/%s: %w", obj.Kind, obj.Name, err)
			}
			out = append(out, res)
			if res.Created && onCreated != nil {
				events = append(events, onCreated(res.Config))
			}
		}
		var err error
		seqs, err = s.insertEvents(ctx, tx, encodeEvents(events, t))
		return err
	})
	stored := make([]store.ConfigObject, len(out))
	for i, r := range out {
		stored[i] = r.Config
	}
	written(stored, err)
	if err != nil {
		return nil, fmt.Errorf("put %d configs: %w", len(objs), err)
	}
	setSeqs(events, seqs, t)
	return out, nil
}

// putConfig stores obj in tx unless its latest version has its hash.
func (s *Store) putConfig(ctx context.Context, tx *wtx, obj store.ConfigObject) (store.PutConfigResult, error) {
	latest, err := scanConfig(tx.QueryRowContext(ctx,
		"SELECT "+configColumns+" FROM configs WHERE kind = ? AND name = ? ORDER BY version DESC LIMIT 1",
		obj.Kind, obj.Name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return store.PutConfigResult{}, err
	case latest.Hash == obj.Hash:
		out, err := s.openConfig(latest)
		return store.PutConfigResult{Config: out}, err
	}
	obj.Version = latest.Version + 1
	obj.CreatedAt = now()
	body, err := s.seal(obj.Body)
	if err != nil {
		return store.PutConfigResult{}, err
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO configs ("+configColumns+") VALUES (?, ?, ?, ?, ?, ?, ?)",
		obj.Kind, obj.Name, obj.Version, dbBytes(body), obj.Hash, obj.Source, dbTime(obj.CreatedAt))
	if err != nil {
		return store.PutConfigResult{}, err
	}
	return store.PutConfigResult{Config: obj, Created: true}, nil
}

// GetConfig implements store.Store.
func (s *Store) GetConfig(ctx context.Context, kind, name string) (store.ConfigObject, error) {
	s.loadConfigs(ctx)
	if obj, found, known := s.configs.get(kind, name); known {
		if !found {
			return store.ConfigObject{}, fmt.Errorf("get config %s/%s: %w", kind, name, store.ErrNotFound)
		}
		return obj, nil
	}
	c, err := scanConfig(s.reads.QueryRowContext(ctx,
		"SELECT "+configColumns+" FROM configs WHERE kind = ? AND name = ? ORDER BY version DESC LIMIT 1", kind, name))
	if err != nil {
		return store.ConfigObject{}, fmt.Errorf("get config %s/%s: %w", kind, name, notFound(err))
	}
	return s.openConfig(c)
}

// GetConfigVersion implements store.Store.
func (s *Store) GetConfigVersion(ctx context.Context, kind, name string, version int64) (store.ConfigObject, error) {
	c, err := scanConfig(s.reads.QueryRowContext(ctx,
		"SELECT "+configColumns+" FROM configs WHERE kind = ? AND name = ? AND version = ?", kind, name, version))
	if err != nil {
		return store.ConfigObject{}, fmt.Errorf("get config %s/%s version %d: %w", kind, name, version, notFound(err))
	}
	return s.openConfig(c)
}

// ListConfigs implements store.Store.
func (s *Store) ListConfigs(ctx context.Context, kinds ...string) ([]store.ConfigObject, error) {
	if err := store.CheckKinds(kinds); err != nil {
		return nil, err
	}
	s.loadConfigs(ctx)
	if out, ok := s.configs.list(kinds); ok {
		return out, nil
	}
	return s.listConfigsFile(ctx, kinds)
}

// loadConfigs loads the config cache when it is empty (see configCache). A
// load that fails leaves it empty: reads go to the file, which reports.
func (s *Store) loadConfigs(ctx context.Context) {
	gen, load := s.configs.startLoad()
	if !load {
		return
	}
	all, err := s.listConfigsFile(ctx, nil)
	s.configs.endLoad(gen, all, err)
}

// listConfigsFile is ListConfigs from the file.
func (s *Store) listConfigsFile(ctx context.Context, kinds []string) ([]store.ConfigObject, error) {
	q := "SELECT " + configColumns + " FROM configs c WHERE version = (SELECT MAX(version) FROM configs WHERE kind = c.kind AND name = c.name)"
	var args []any
	if len(kinds) > 0 {
		q += " AND kind IN (?" + strings.Repeat(", ?", len(kinds)-1) + ")"
		for _, k := range kinds {
			args = append(args, k)
		}
	}
	q += " ORDER BY kind, name"
	out, err := queryAll(ctx, s.reads, q, args, scanConfig)
	if err != nil {
		return nil, fmt.Errorf("list configs %q: %w", kinds, err)
	}
	return store.UnsealAll(out, s.openConfig)
}

// notFound maps sql.ErrNoRows to store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args []any, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
