package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

// Values at rest that may hold secrets (config bodies, desired states'
// parameters and compiled forms) go through the store's sealer, when it has
// one (WithSealer): sealed as they are written, opened as the store's
// methods return them. Dumps read and write them sealed.

// seal is b as stored.
func (s *Store) seal(b []byte) ([]byte, error) {
	if s.sealer == nil || b == nil {
		return b, nil
	}
	return s.sealer.Seal(b)
}

// open is a stored value as it was given.
func (s *Store) open(b []byte) ([]byte, error) {
	if s.sealer == nil || b == nil {
		return b, nil
	}
	return s.sealer.Open(b)
}

// openConfig opens a stored config's body.
func (s *Store) openConfig(c store.ConfigObject) (store.ConfigObject, error) {
	body, err := s.open(c.Body)
	if err != nil {
		return store.ConfigObject{}, fmt.Errorf("config %s/%s version %d: %w", c.Kind, c.Name, c.Version, err)
	}
	c.Body = body
	return c, nil
}

// openDesired opens a stored desired state's parameters and compiled form.
func (s *Store) openDesired(ds store.DesiredState) (store.DesiredState, error) {
	var err error
	if ds.Params, err = s.open(ds.Params); err == nil {
		ds.Compiled, err = s.open(ds.Compiled)
	}
	if err != nil {
		return store.DesiredState{}, fmt.Errorf("desired state %s: %w", ds.ID, err)
	}
	return ds, nil
}

// openAll opens each of list with open.
func openAll[T any](list []T, open func(T) (T, error)) ([]T, error) {
	for i := range list {
		v, err := open(list[i])
		if err != nil {
			return nil, err
		}
		list[i] = v
	}
	return list, nil
}

// currentSealer is a sealer that tells whether its current key sealed a
// value (sealing.Keyring): those values need no resealing.
type currentSealer interface {
	IsSealed(b []byte) (sealed, current bool)
}

// Reseal seals again, with the store's sealer, every config body and every
// desired state's parameters and compiled form not sealed by its current
// key (sealed by an older key of the keyring, or stored before sealing), in
// one transaction, and returns how many values it rewrote. After it, the
// keyring's older keys can go.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	if s.sealer == nil {
		return 0, errors.New("reseal: the store has no sealer")
	}
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		for _, t := range resealTables {
			rows, err := tx.Query(ctx, "SELECT "+t.key+"::text, "+t.column+" FROM "+t.table+" WHERE "+t.column+" IS NOT NULL")
			if err != nil {
				return err
			}
			type value struct {
				key string
				b   []byte
			}
			var stale []value
			for rows.Next() {
				var v value
				if err := rows.Scan(&v.key, &v.b); err != nil {
					rows.Close()
					return err
				}
				if cs, ok := s.sealer.(currentSealer); ok {
					if _, current := cs.IsSealed(v.b); current {
						continue
					}
				}
				stale = append(stale, v)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, v := range stale {
				plain, err := s.open(v.b)
				if err != nil {
					return fmt.Errorf("%s.%s %s: %w", t.table, t.column, v.key, err)
				}
				sealed, err := s.seal(plain)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "UPDATE "+t.table+" SET "+t.column+" = $1 WHERE "+t.key+"::text = $2", sealed, v.key); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reseal: %w", err)
	}
	return n, nil
}

// resealTables are the columns the sealer keeps, with a key of their rows.
var resealTables = []struct{ table, column, key string }{
	{"configs", "body", "(kind, name, version)"}, {"desired_states", "params", "id"}, {"desired_state_compiled", "compiled", "id"},
}
