package postgres

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Retention of desired states, as the SQLite store does it. Every push
// stores a desired state with its compiled copy, which can be large.
// CreateDesiredState bounds that in the same transaction:
//
//   - a push whose compiled copy equals the active desired state's stores no
//     second copy: its row names the row that holds it (compiled_from);
//   - the service's superseded desired states beyond the newest N lose their
//     compiled copy (its desired_state_compiled row is deleted, pruned_at
//     set), except those an instance still needs: its desired, target and
//     current state, and the previous converged state a rollback returns to
//     (PreviousStateID). A row whose copy a kept row shares keeps it too.
//
// Rows stay, so approvals, tasks and events keep what they refer to.

// sharedCopy returns the id of the row holding the active desired state's
// compiled copy when it equals compiled, or "".
func (s *Store) sharedCopy(ctx context.Context, tx pgx.Tx, application, service string, compiled []byte) (string, error) {
	if compiled == nil {
		return "", nil
	}
	var (
		origin string
		stored []byte
	)
	err := tx.QueryRow(ctx, `SELECT c.id, c.compiled FROM desired_states d
		JOIN desired_state_compiled c ON c.id = COALESCE(d.compiled_from, d.id)
		WHERE d.application = $1 AND d.service = $2 AND d.replaced_by IS NULL`,
		application, service).Scan(&origin, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
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

// unprunedQuery counts a service's superseded desired states that still
// hold (or share) a compiled copy: when there are no more than the bound,
// nothing can be pruned and the costlier pruning is skipped.
const unprunedQuery = `SELECT count(*) FROM desired_states
	WHERE application = $1 AND service = $2 AND replaced_by IS NOT NULL AND pruned_at IS NULL`

// lockInstances locks the service's instances (FOR SHARE) until the
// transaction ends, so that the references pruning reads are the committed
// ones and cannot change before it commits.
const lockInstances = `SELECT 1 FROM instances WHERE application = $1 AND service = $2 FOR SHARE`

// prunable selects the ids of the desired states pruning drops the copy of:
// $1 application, $2 service, $3 the bound.
const prunable = `WITH
	recent AS (SELECT ord FROM desired_states WHERE application = $1 AND service = $2 AND replaced_by IS NOT NULL
		ORDER BY ord DESC LIMIT $3),
	used AS (
		SELECT desired_state_id AS id FROM instances WHERE application = $1 AND service = $2
		UNION SELECT target_state_id FROM instances WHERE application = $1 AND service = $2
		UNION SELECT current_state_id FROM instances WHERE application = $1 AND service = $2
		UNION SELECT previous_state_id FROM instances WHERE application = $1 AND service = $2)
SELECT d.id FROM desired_states d
WHERE d.application = $1 AND d.service = $2 AND d.replaced_by IS NOT NULL AND d.pruned_at IS NULL
	AND d.ord NOT IN (SELECT ord FROM recent)
	AND d.id NOT IN (SELECT id FROM used)
	AND NOT EXISTS (SELECT 1 FROM desired_states k WHERE k.compiled_from = d.id AND k.pruned_at IS NULL)`

// dropPrunedCopies deletes the compiled copies of the prunable rows.
const dropPrunedCopies = `DELETE FROM desired_state_compiled WHERE id IN (` + prunable + `)`

// markPruned marks the prunable rows pruned at $4.
const markPruned = `UPDATE desired_states SET compiled_from = NULL, pruned_at = $4 WHERE id IN (` + prunable + `)`

// pruneSuperseded drops the compiled copies the retention bound lets go. It
// runs twice: the first pass frees the rows that share a copy, the second
// the rows that held a copy only they shared.
func (s *Store) pruneSuperseded(ctx context.Context, tx pgx.Tx, application, service string, t time.Time) error {
	if s.keepSuperseded < 0 {
		return nil
	}
	var unpruned int
	if err := tx.QueryRow(ctx, unprunedQuery, application, service).Scan(&unpruned); err != nil {
		return err
	}
	if unpruned <= s.keepSuperseded {
		return nil
	}
	if _, err := tx.Exec(ctx, lockInstances, application, service); err != nil {
		return err
	}
	for range 2 {
		// The copies go first: the rows' conditions do not read them.
		if _, err := tx.Exec(ctx, dropPrunedCopies, application, service, s.keepSuperseded); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, markPruned, application, service, s.keepSuperseded, nanos(t)); err != nil {
			return err
		}
	}
	return nil
}
