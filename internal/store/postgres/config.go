package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

const configColumns = "kind, name, version, body, hash, source, created_at"

func scanConfig(row scanner) (store.ConfigObject, error) {
	var c store.ConfigObject
	err := row.Scan(&c.Kind, &c.Name, &c.Version, &c.Body, &c.Hash, &c.Source, at(&c.CreatedAt))
	return c, err
}

// selectLatestConfig reads the latest version of a config ($1 kind, $2 name).
const selectLatestConfig = "SELECT " + configColumns + " FROM configs WHERE kind = $1 AND name = $2 ORDER BY version DESC LIMIT 1"

// freezeKind is the config kind of freezes (desiredstate.FreezeKind).
const freezeKind = "freeze"

// PutConfig implements store.Store. Puts of one config are serialized by an
// advisory lock (see lockConfigs), so the latest version each compares with
// is the committed one and versions never collide.
func (s *Store) PutConfig(ctx context.Context, obj store.ConfigObject) (store.ConfigObject, bool, error) {
	if err := obj.CheckPut(); err != nil {
		return store.ConfigObject{}, false, err
	}
	var res store.PutConfigResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockConfigs(ctx, tx, []store.ConfigObject{obj}); err != nil {
			return err
		}
		var err error
		res, err = s.putConfig(ctx, tx, obj)
		return err
	})
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out, events = make([]store.PutConfigResult, len(objs)), nil
		if err := lockConfigs(ctx, tx, objs); err != nil {
			return err
		}
		for i, obj := range objs {
			res, err := s.putConfig(ctx, tx, obj)
			if err != nil {
				return fmt.Errorf("put config %s/%s: %w", obj.Kind, obj.Name, err)
			}
			out[i] = res
		}
		if onCreated != nil {
			for _, res := range out {
				if res.Created {
					events = append(events, onCreated(res.Config))
				}
			}
		}
		var err error
		seqs, err = insertEvents(ctx, tx, events, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("put %d configs: %w", len(objs), err)
	}
	setSeqs(events, seqs, t)
	return out, nil
}

// configLockBuckets is how many advisory locks guard configs: each config
// is guarded by one of them, chosen by a hash of its kind and name. One lock
// per config would take one lock per config of an apply, and PostgreSQL's
// lock table (max_locks_per_transaction) runs out past 20,000 with the
// defaults; two configs sharing a bucket only wait for each other.
const configLockBuckets = 256

// lockConfigs takes the advisory locks guarding objs, in ascending order
// of bucket, so two transactions locking several cannot deadlock.
func lockConfigs(ctx context.Context, tx pgx.Tx, objs []store.ConfigObject) error {
	buckets := make([]uint64, 0, len(objs))
	for _, obj := range objs {
		h := fnv.New64a()
		_, _ = h.Write([]byte(obj.Kind))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(obj.Name))
		buckets = append(buckets, h.Sum64()%configLockBuckets)
	}
	slices.Sort(buckets)
	for _, b := range slices.Compact(buckets) {
		if err := lockName(ctx, tx, "config", strconv.FormatUint(b, 10)); err != nil {
			return err
		}
	}
	return nil
}

// putConfig stores obj in tx, which holds its lock, unless its latest
// version has its hash.
func (s *Store) putConfig(ctx context.Context, tx pgx.Tx, obj store.ConfigObject) (store.PutConfigResult, error) {
	latest, err := scanConfig(tx.QueryRow(ctx, selectLatestConfig, obj.Kind, obj.Name))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
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
	_, err = tx.Exec(ctx, "INSERT INTO configs ("+configColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7)",
		obj.Kind, obj.Name, obj.Version, body, obj.Hash, obj.Source, nanos(obj.CreatedAt))
	if err != nil {
		return store.PutConfigResult{}, err
	}
	switch obj.Kind {
	case "runtime":
		err = notify(ctx, tx, "r") // runtime hosts build it again
	case freezeKind:
		err = notify(ctx, tx, "f") // engines read the freezes again
	}
	return store.PutConfigResult{Config: obj, Created: true}, err
}

// GetConfig implements store.Store.
func (s *Store) GetConfig(ctx context.Context, kind, name string) (store.ConfigObject, error) {
	c, err := scanConfig(s.pool.QueryRow(ctx, selectLatestConfig, kind, name))
	if err != nil {
		return store.ConfigObject{}, fmt.Errorf("get config %s/%s: %w", kind, name, notFound(err))
	}
	return s.openConfig(c)
}

// GetConfigVersion implements store.Store.
func (s *Store) GetConfigVersion(ctx context.Context, kind, name string, version int64) (store.ConfigObject, error) {
	c, err := scanConfig(s.pool.QueryRow(ctx,
		"SELECT "+configColumns+" FROM configs WHERE kind = $1 AND name = $2 AND version = $3", kind, name, version))
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
	q := "SELECT DISTINCT ON (kind, name) " + configColumns + " FROM configs"
	var args []any
	if len(kinds) > 0 {
		q += " WHERE kind = ANY($1)"
		args = append(args, kinds)
	}
	q += " ORDER BY kind, name, version DESC"
	out, err := queryAll(ctx, s.pool, q, args, scanConfig)
	if err != nil {
		return nil, fmt.Errorf("list configs %q: %w", kinds, err)
	}
	return store.UnsealAll(out, s.openConfig)
}
