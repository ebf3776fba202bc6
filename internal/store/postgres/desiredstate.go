package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

const desiredStateColumns = "id, application, service, version, config_version, params, rollback, release_channels, created_by, created_at"

// selectDesiredState reads desired states (as d) with their compiled copy,
// which lives apart (desired_state_compiled); a row that shares another's
// copy (compiled_from) reads that copy.
const selectDesiredState = "SELECT d.id, d.application, d.service, d.version, d.config_version, c.compiled," +
	" d.params, d.rollback, d.release_channels, d.created_by, d.created_at, COALESCE(d.replaced_by, ''), d.pruned_at" +
	" FROM desired_states d LEFT JOIN desired_state_compiled c ON c.id = COALESCE(d.compiled_from, d.id)"

// selectDesiredStateHead reads desired states (as d) without their compiled copy.
const selectDesiredStateHead = "SELECT d.id, d.application, d.service, d.version, d.config_version, NULL::bytea," +
	" d.params, d.rollback, d.release_channels, d.created_by, d.created_at, COALESCE(d.replaced_by, ''), d.pruned_at" +
	" FROM desired_states d"

func scanDesiredState(row scanner) (store.DesiredState, error) {
	var ds store.DesiredState
	err := row.Scan(&ds.ID, &ds.Application, &ds.Service, &ds.Version, &ds.ConfigVersion, &ds.Compiled, &ds.Params,
		&ds.Rollback, &ds.ReleaseChannels, &ds.CreatedBy, at(&ds.CreatedAt), &ds.ReplacedBy, at(&ds.PrunedAt))
	return ds, err
}

// CreateDesiredState implements store.Store. Creations for one service are
// serialized by an advisory lock on the service, so concurrent pushes form
// one chain of replacements and retention sees the committed states. A
// zero ds.CreatedAt is set to the current time; ds.ReplacedBy and
// ds.PrunedAt are ignored. An existing ds.ID fails with store.ErrConflict.
func (s *Store) CreateDesiredState(ctx context.Context, ds store.DesiredState, events ...store.Event) error {
	_, err := s.createDesiredState(ctx, ds, nil, events)
	return err
}

// PushDesiredState implements store.Store.
func (s *Store) PushDesiredState(ctx context.Context, ds store.DesiredState, audit store.AuditRecord, events ...store.Event) (int64, error) {
	if err := audit.Check(); err != nil {
		return 0, err
	}
	return s.createDesiredState(ctx, ds, &audit, events)
}

// createDesiredState stores ds with its events and, unless nil, the audit
// record of the request that made it (whose seq it returns). The audit
// log's lock is taken before the events' (which come last): no transaction
// takes them the other way round.
func (s *Store) createDesiredState(ctx context.Context, ds store.DesiredState, audit *store.AuditRecord, events []store.Event) (int64, error) {
	if err := ds.Check(); err != nil {
		return 0, err
	}
	t := now()
	if ds.CreatedAt.IsZero() {
		ds.CreatedAt = t
	}
	var (
		seqs     []int64
		auditSeq int64
	)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockName(ctx, tx, "desired-state", ds.Application, ds.Service); err != nil {
			return err
		}
		if err := s.insertDesiredState(ctx, tx, ds, t); err != nil {
			return err
		}
		if err := notifyService(ctx, tx, ds.Application, ds.Service); err != nil {
			return err
		}
		var err error
		if audit != nil {
			if auditSeq, err = appendAudit(ctx, tx, *audit); err != nil {
				return err
			}
		}
		seqs, err = insertEvents(ctx, tx, events, t)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("create desired state %s of %s/%s: %w", ds.ID, ds.Application, ds.Service, err)
	}
	setSeqs(events, seqs, t)
	return auditSeq, nil
}

// insertDesiredState stores ds as the service's active desired state in tx,
// replacing the previous one, and applies retention.
func (s *Store) insertDesiredState(ctx context.Context, tx pgx.Tx, ds store.DesiredState, t time.Time) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM desired_states WHERE id = $1)", ds.ID).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("id already exists: %w", store.ErrConflict)
	}
	// A push identical to the active desired state shares its copy.
	origin, err := s.sharedCopy(ctx, tx, ds.Application, ds.Service, ds.Compiled)
	if err != nil {
		return err
	}
	params, err := s.seal(ds.Params)
	if err != nil {
		return err
	}
	compiled, err := s.seal(ds.Compiled)
	if err != nil {
		return err
	}
	// The foreign key on replaced_by is checked at commit, so the previous
	// active state can point at ds before ds is inserted (the unique index
	// on active states forbids the reverse order).
	if _, err := tx.Exec(ctx,
		"UPDATE desired_states SET replaced_by = $1 WHERE application = $2 AND service = $3 AND replaced_by IS NULL",
		ds.ID, ds.Application, ds.Service); err != nil {
		return err
	}
	var from any
	if origin != "" {
		from = origin
	}
	if _, err := tx.Exec(ctx, "INSERT INTO desired_states ("+desiredStateColumns+", compiled_from)"+
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
		ds.ID, ds.Application, ds.Service, ds.Version, ds.ConfigVersion, params, ds.Rollback,
		texts(ds.ReleaseChannels), text(ds.CreatedBy), nanos(ds.CreatedAt), from); err != nil {
		return err
	}
	if origin == "" && ds.Compiled != nil {
		if _, err := tx.Exec(ctx, "INSERT INTO desired_state_compiled (id, compiled) VALUES ($1, $2)", ds.ID, compiled); err != nil {
			return err
		}
	}
	return s.pruneSuperseded(ctx, tx, ds.Application, ds.Service, t)
}

// GetDesiredState implements store.Store.
func (s *Store) GetDesiredState(ctx context.Context, id string) (store.DesiredState, error) {
	ds, err := scanDesiredState(s.pool.QueryRow(ctx, selectDesiredState+" WHERE d.id = $1", id))
	if err != nil {
		return store.DesiredState{}, fmt.Errorf("get desired state %s: %w", id, notFound(err))
	}
	return s.openDesired(ds)
}

// ActiveDesiredState implements store.Store.
func (s *Store) ActiveDesiredState(ctx context.Context, application, service string) (store.DesiredState, error) {
	ds, err := scanDesiredState(s.pool.QueryRow(ctx,
		selectDesiredStateHead+" WHERE d.application = $1 AND d.service = $2 AND d.replaced_by IS NULL",
		application, service))
	if err != nil {
		return store.DesiredState{}, fmt.Errorf("active desired state of %s/%s: %w", application, service, notFound(err))
	}
	return s.openDesired(ds)
}

// ListActiveDesiredStates implements store.Store; they are ordered by
// application and service.
func (s *Store) ListActiveDesiredStates(ctx context.Context) ([]store.DesiredState, error) {
	out, err := queryAll(ctx, s.pool,
		selectDesiredStateHead+" WHERE d.replaced_by IS NULL ORDER BY d.application, d.service",
		nil, scanDesiredState)
	if err != nil {
		return nil, fmt.Errorf("list active desired states: %w", err)
	}
	return store.UnsealAll(out, s.openDesired)
}

// ListDesiredStates implements store.Store; limit <= 0 means no limit.
func (s *Store) ListDesiredStates(ctx context.Context, application, service string, limit int) ([]store.DesiredState, error) {
	out, err := queryAll(ctx, s.pool,
		selectDesiredState+" WHERE d.application = $1 AND d.service = $2 ORDER BY d.ord DESC LIMIT $3",
		[]any{application, service, limitArg(limit)}, scanDesiredState)
	if err != nil {
		return nil, fmt.Errorf("list desired states of %s/%s: %w", application, service, err)
	}
	return store.UnsealAll(out, s.openDesired)
}

const approvalColumns = "desired_state_id, application, service, release_channel, topic, user_name, reject, comment, created_at"

func scanApproval(row scanner) (store.Approval, error) {
	var a store.Approval
	err := row.Scan(&a.DesiredStateID, &a.Application, &a.Service, &a.ReleaseChannel, &a.Topic, &a.User, &a.Reject,
		&a.Comment, at(&a.CreatedAt))
	return a, err
}

// selectApprovals reads the approvals of a desired state ($1), oldest first.
const selectApprovals = "SELECT " + approvalColumns + " FROM approvals WHERE desired_state_id = $1 ORDER BY ord"

// AddApproval implements store.Store. The transaction locks the desired
// state's row (FOR NO KEY UPDATE) before it reads the approvals, so calls for
// one desired state run one after another: decide sees every approval
// committed before it, and none can be added until this call ends. A call
// that PostgreSQL picks as a deadlock victim runs again, decide included.
func (s *Store) AddApproval(ctx context.Context, desiredStateID string, decide store.DecideApproval) (store.Approval, error) {
	if desiredStateID == "" {
		return store.Approval{}, errors.New("add approval: desired state is required")
	}
	t := now()
	var (
		a      store.Approval
		events []store.Event
		seqs   []int64
	)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		ds, err := scanDesiredState(tx.QueryRow(ctx, selectDesiredState+" WHERE d.id = $1 FOR NO KEY UPDATE OF d", desiredStateID))
		if err != nil {
			return fmt.Errorf("desired state: %w", notFound(err))
		}
		if ds, err = s.openDesired(ds); err != nil {
			return err
		}
		recorded, err := queryAll(ctx, tx, selectApprovals, []any{desiredStateID}, scanApproval)
		if err != nil {
			return err
		}
		a, events, err = decide(ds, recorded)
		if err != nil {
			return err
		}
		if err := insertApproval(ctx, tx, desiredStateID, &a, t); err != nil {
			return err
		}
		if err := notifyService(ctx, tx, ds.Application, ds.Service); err != nil {
			return err
		}
		seqs, err = insertEvents(ctx, tx, events, t)
		return err
	})
	if err != nil {
		return store.Approval{}, fmt.Errorf("add approval to %s: %w", desiredStateID, err)
	}
	setSeqs(events, seqs, t)
	a.CreatedAt = a.CreatedAt.UTC()
	return a, nil
}

// insertApproval validates and records a (a zero CreatedAt becomes t), or
// fails with store.ErrDuplicate when its user already has a record for its
// topic.
func insertApproval(ctx context.Context, tx pgx.Tx, desiredStateID string, a *store.Approval, t time.Time) error {
	if a.DesiredStateID != desiredStateID || a.Topic == "" || a.User == "" {
		return fmt.Errorf("approval of %q topic %q by %q: desired state %s, topic and user are required",
			a.DesiredStateID, a.Topic, a.User, desiredStateID)
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = t
	}
	tag, err := tx.Exec(ctx, "INSERT INTO approvals ("+approvalColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"+
		" ON CONFLICT (desired_state_id, topic, user_name) DO NOTHING",
		a.DesiredStateID, a.Application, a.Service, a.ReleaseChannel, a.Topic, a.User, a.Reject, text(a.Comment), nanos(a.CreatedAt))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s of topic %q: %w", a.User, a.Topic, store.ErrDuplicate)
	}
	return nil
}

// ListApprovals implements store.Store.
func (s *Store) ListApprovals(ctx context.Context, desiredStateID string) ([]store.Approval, error) {
	out, err := queryAll(ctx, s.pool, selectApprovals, []any{desiredStateID}, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("list approvals of %s: %w", desiredStateID, err)
	}
	return out, nil
}
