package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// Retention of desired states (B10). Every push stores a desired state with
// its compiled copy, which can be large (a config with big inlined files).
// CreateDesiredState bounds that in the same transaction:
//
//   - a push whose compiled copy equals the active desired state's stores no
//     second copy: its row names the row that holds it (compiled_from);
//   - the service's superseded desired states beyond the newest N lose their
//     compiled copy (compiled NULL, pruned_at set), except those an instance
//     still needs: its desired, target and current state, and the previous
//     converged state a rollback returns to (PreviousStateID). A row
//     whose copy a kept row shares keeps it too.
//
// Rows stay, so approvals, tasks and events keep what they refer
// to; they are small. Events are the history and are not pruned.

// Option configures Open.
type Option func(*options)

type options struct {
	keepSuperseded int
	sealer         store.Sealer
}

// WithSealer encrypts config bodies and desired states' parameters and
// compiled forms at rest with sealer (see seal.go).
func WithSealer(sealer store.Sealer) Option { return func(o *options) { o.sealer = sealer } }

// KeepSuperseded sets how many superseded desired states per service keep
// their compiled copy beyond those instances reference
// (store.DefaultKeepSuperseded by default); a negative n keeps them all.
func KeepSuperseded(n int) Option { return func(o *options) { o.keepSuperseded = n } }

// sharedCopy returns the id of the row holding the active desired state's
// compiled copy when it equals compiled, or "".
func (s *Store) sharedCopy(ctx context.Context, tx *wtx, application, service string, compiled []byte) (string, error) {
	if compiled == nil {
		return "", nil
	}
	var origin string
	var stored []byte
	err := tx.QueryRowContext(ctx, sharedCopyQuery, application, service).Scan(&origin, &stored)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	// Sealed copies differ even when their content is the same: compare
	// what they hold.
	if plain, err := s.open(stored); err != nil || !bytes.Equal(plain, compiled) {
		return "", nil //nolint:nilerr // a copy that does not open is not shared
	}
	return origin, nil
}

const sharedCopyQuery = `SELECT c.id, c.compiled FROM desired_states d
	JOIN desired_state_compiled c ON c.id = COALESCE(d.compiled_from, d.id)
	WHERE d.application = ? AND d.service = ? AND d.replaced_by IS NULL`

// unprunedQuery counts a service's superseded desired states that still
// hold (or share) a compiled copy: when there are no more than the bound,
// nothing can be pruned and the costlier pruneSuperseded is skipped.
const unprunedQuery = `SELECT count(*) FROM desired_states
	WHERE application = ? AND service = ? AND replaced_by IS NOT NULL AND pruned_at IS NULL`

// pruneSuperseded drops the compiled copies the retention bound lets go. It
// runs twice: the first pass frees the rows that share a copy, the second
// the rows that held a copy only they shared.
func (s *Store) pruneSuperseded(ctx context.Context, tx *wtx, application, service string, at time.Time) error {
	if s.keepSuperseded < 0 {
		return nil
	}
	var unpruned int
	if err := tx.QueryRowContext(ctx, unprunedQuery, application, service).Scan(&unpruned); err != nil {
		return err
	}
	if unpruned <= s.keepSuperseded {
		return nil
	}
	for range 2 {
		// The copies go first: the rows' conditions do not read them.
		if _, err := tx.ExecContext(ctx, dropPrunedCopies, dbTime(at), application, service, s.keepSuperseded); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, pruneSuperseded, dbTime(at), application, service, s.keepSuperseded); err != nil {
			return err
		}
	}
	return nil
}

// prunable selects the ids of the desired states pruneSuperseded prunes.
const prunable = `WITH
	recent(ord) AS (SELECT ord FROM desired_states WHERE application = ?2 AND service = ?3 AND replaced_by IS NOT NULL
		ORDER BY ord DESC LIMIT ?4),
	used(id) AS (SELECT id FROM (
		SELECT desired_state_id AS id FROM instances WHERE application = ?2 AND service = ?3
		UNION SELECT target_state_id FROM instances WHERE application = ?2 AND service = ?3
		UNION SELECT current_state_id FROM instances WHERE application = ?2 AND service = ?3
		UNION SELECT previous_state_id FROM instances
			WHERE application = ?2 AND service = ?3) WHERE id IS NOT NULL AND id != '')
SELECT id FROM desired_states
WHERE application = ?2 AND service = ?3 AND replaced_by IS NOT NULL AND pruned_at IS NULL
	AND ord NOT IN (SELECT ord FROM recent)
	AND id NOT IN (SELECT id FROM used)
	AND NOT EXISTS (SELECT 1 FROM desired_states k WHERE k.compiled_from = desired_states.id AND k.pruned_at IS NULL)`

// dropPrunedCopies deletes the compiled copies of the prunable rows.
const dropPrunedCopies = `DELETE FROM desired_state_compiled WHERE id IN (` + prunable + `)`

// pruneSuperseded marks the prunable rows pruned.
const pruneSuperseded = `UPDATE desired_states SET compiled_from = NULL, pruned_at = ?1 WHERE id IN (` + prunable + `)`
