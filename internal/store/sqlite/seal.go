package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// Values at rest that may hold secrets (config bodies, desired states'
// parameters and compiled forms, the secrets' values) go through the store's sealer, when it has
// one (WithSealer): sealed as they are written, opened as the store's
// methods return them. Dumps read and write them sealed.

// seal is b as stored.
func (s *Store) seal(b []byte) ([]byte, error) { return store.Seal(s.sealer, b) }

// open is a stored value as it was given.
func (s *Store) open(b []byte) ([]byte, error) { return store.Unseal(s.sealer, b) }

// openConfig opens a stored config's body.
func (s *Store) openConfig(c store.ConfigObject) (store.ConfigObject, error) {
	return store.UnsealConfig(s.sealer, c)
}

// openDesired opens a stored desired state's parameters and compiled form.
func (s *Store) openDesired(ds store.DesiredState) (store.DesiredState, error) {
	return store.UnsealDesired(s.sealer, ds)
}

// Reseal seals again, with the store's sealer, every config body, every
// desired state's parameters and compiled form and every secret's value not
// sealed by its current key (sealed by an older key of the keyring, or
// stored before sealing), in one transaction, and returns how many values it rewrote. After it, the
// keyring's older keys can go.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	if s.sealer == nil {
		return 0, errors.New("reseal: the store has no sealer")
	}
	n := 0
	err := s.writeTx(ctx, func(tx *wtx) error {
		for _, t := range resealTables {
			rows, err := tx.QueryContext(ctx, "SELECT rowid, "+t.column+" FROM "+t.table+" WHERE "+t.column+" IS NOT NULL")
			if err != nil {
				return err
			}
			type value struct {
				rowid int64
				b     []byte
			}
			var stale []value
			for rows.Next() {
				var v value
				if err := rows.Scan(&v.rowid, &v.b); err != nil {
					_ = rows.Close()
					return err
				}
				if store.NeedsReseal(s.sealer, v.b) {
					stale = append(stale, v)
				}
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return err
			}
			for _, v := range stale {
				plain, err := s.open(v.b)
				if err != nil {
					return fmt.Errorf("%s.%s row %d: %w", t.table, t.column, v.rowid, err)
				}
				sealed, err := s.seal(plain)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "UPDATE "+t.table+" SET "+t.column+" = ? WHERE rowid = ?", sealed, v.rowid); err != nil {
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

// resealTables are the columns the sealer keeps.
var resealTables = []struct{ table, column string }{
	{"configs", "body"}, {"desired_states", "params"}, {"desired_state_compiled", "compiled"}, {"secrets", "value"},
}
