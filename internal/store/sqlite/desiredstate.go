package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

const desiredStateColumns = "id, application, service, version, config_version, params, rollback, release_channels, created_by, created_at, replaced_by"

// selectDesiredState reads a desired state with its compiled copy, which
// lives apart (desired_state_compiled); a row that shares another's copy
// (compiled_from) reads that copy.
const selectDesiredState = "SELECT id, application, service, version, config_version," +
	" (SELECT c.compiled FROM desired_state_compiled c WHERE c.id = COALESCE(desired_states.compiled_from, desired_states.id))," +
	" params, rollback, release_channels, created_by, created_at, replaced_by, pruned_at FROM desired_states"

// selectDesiredStateHead reads desired states without their compiled form.
const selectDesiredStateHead = "SELECT id, application, service, version, config_version, NULL," +
	" params, rollback, release_channels, created_by, created_at, replaced_by, pruned_at FROM desired_states"

func scanDesiredState(row interface{ Scan(...any) error }) (store.DesiredState, error) {
	var (
		ds         store.DesiredState
		channels   sql.NullString
		replacedBy sql.NullString
	)
	err := row.Scan(&ds.ID, &ds.Application, &ds.Service, &ds.Version, &ds.ConfigVersion, &ds.Compiled, &ds.Params,
		&ds.Rollback, &channels, &ds.CreatedBy, scanTime{&ds.CreatedAt}, &replacedBy, scanTime{&ds.PrunedAt})
	if err != nil {
		return store.DesiredState{}, err
	}
	if channels.Valid {
		if err := json.Unmarshal([]byte(channels.String), &ds.ReleaseChannels); err != nil {
			return store.DesiredState{}, fmt.Errorf("desired state %s: release_channels: %w", ds.ID, err)
		}
	}
	ds.ReplacedBy = replacedBy.String
	return ds, nil
}

// CreateDesiredState implements store.Store. A zero ds.CreatedAt is set to
// the current time; ds.ReplacedBy is ignored (a new desired state is active).
// An existing ds.ID fails with store.ErrConflict.
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
// record of the request that made it (whose seq it returns).
func (s *Store) createDesiredState(ctx context.Context, ds store.DesiredState, audit *store.AuditRecord, events []store.Event) (int64, error) {
	if err := ds.Check(); err != nil {
		return 0, err
	}
	var channels any
	if len(ds.ReleaseChannels) > 0 {
		b, err := json.Marshal(ds.ReleaseChannels)
		if err != nil {
			return 0, fmt.Errorf("create desired state %s: %w", ds.ID, err)
		}
		channels = string(b)
	}
	t := now()
	if ds.CreatedAt.IsZero() {
		ds.CreatedAt = t
	}
	// Encoded before the transaction, outside the single writer's turn.
	params, err := s.seal(ds.Params)
	if err != nil {
		return 0, fmt.Errorf("create desired state %s: %w", ds.ID, err)
	}
	compiled, err := s.seal(ds.Compiled)
	if err != nil {
		return 0, fmt.Errorf("create desired state %s: %w", ds.ID, err)
	}
	rows := encodeEvents(events, t)
	var (
		seqs     []int64
		auditSeq int64
	)
	err = s.writeTxRerun(ctx, durable, func(tx *wtx) error {
		var exists int
		err := tx.QueryRowContext(ctx, "SELECT 1 FROM desired_states WHERE id = ?", ds.ID).Scan(&exists)
		if err == nil {
			return fmt.Errorf("id already exists: %w", store.ErrConflict)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// A push identical to the active desired state shares its copy.
		origin, err := s.sharedCopy(ctx, tx, ds.Application, ds.Service, ds.Compiled)
		if err != nil {
			return err
		}
		tx.inst.replaced = append(tx.inst.replaced, svcKey{ds.Application, ds.Service})
		// The foreign key on replaced_by is deferred to the commit, so the
		// previous active state can point at ds before ds is inserted (the
		// unique index on active states forbids the reverse order).
		if _, err := tx.ExecContext(ctx,
			"UPDATE desired_states SET replaced_by = ? WHERE application = ? AND service = ? AND replaced_by IS NULL",
			ds.ID, ds.Application, ds.Service); err != nil {
			return err
		}
		var from any
		if origin != "" {
			from = origin
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO desired_states ("+desiredStateColumns+", compiled_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
			ds.ID, ds.Application, ds.Service, ds.Version, ds.ConfigVersion, dbBytes(params),
			ds.Rollback, channels, ds.CreatedBy, dbTime(ds.CreatedAt), from)
		if err != nil {
			return err
		}
		if origin == "" && ds.Compiled != nil {
			if _, err := tx.ExecContext(ctx, "INSERT INTO desired_state_compiled (id, compiled) VALUES (?, ?)", ds.ID, compiled); err != nil {
				return err
			}
		}
		if err := s.pruneSuperseded(ctx, tx, ds.Application, ds.Service, t); err != nil {
			return err
		}
		if audit != nil {
			if auditSeq, err = insertAudit(ctx, tx, *audit); err != nil {
				return err
			}
		}
		seqs, err = s.insertEvents(ctx, tx, rows)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("create desired state %s of %s/%s: %w", ds.ID, ds.Application, ds.Service, err)
	}
	setSeqs(events, seqs, t)
	return auditSeq, nil
}

// GetDesiredState implements store.Store.
func (s *Store) GetDesiredState(ctx context.Context, id string) (store.DesiredState, error) {
	ds, err := scanDesiredState(s.reads.QueryRowContext(ctx,
		selectDesiredState+" WHERE id = ?", id))
	if err != nil {
		return store.DesiredState{}, fmt.Errorf("get desired state %s: %w", id, notFound(err))
	}
	return s.openDesired(ds)
}

// ActiveDesiredState implements store.Store.
func (s *Store) ActiveDesiredState(ctx context.Context, application, service string) (store.DesiredState, error) {
	ds, gen, ok := s.instances.activeState(application, service)
	if ok {
		return ds, nil
	}
	ds, err := scanDesiredState(s.reads.QueryRowContext(ctx,
		selectDesiredStateHead+" WHERE application = ? AND service = ? AND replaced_by IS NULL",
		application, service))
	if err != nil {
		return store.DesiredState{}, fmt.Errorf("active desired state of %s/%s: %w", application, service, notFound(err))
	}
	if ds, err = s.openDesired(ds); err != nil {
		return store.DesiredState{}, err
	}
	s.instances.fillActive(application, service, gen, ds)
	return ds, nil
}

// ListActiveDesiredStates implements store.Store; they are ordered by
// application and service.
func (s *Store) ListActiveDesiredStates(ctx context.Context) ([]store.DesiredState, error) {
	out, err := queryAll(ctx, s.reads,
		selectDesiredStateHead+" WHERE replaced_by IS NULL ORDER BY application, service",
		nil, scanDesiredState)
	if err != nil {
		return nil, fmt.Errorf("list active desired states: %w", err)
	}
	return store.UnsealAll(out, s.openDesired)
}

// ListDesiredStates implements store.Store; limit <= 0 means no limit.
func (s *Store) ListDesiredStates(ctx context.Context, application, service string, limit int) ([]store.DesiredState, error) {
	out, err := queryAll(ctx, s.reads,
		selectDesiredState+" WHERE application = ? AND service = ? ORDER BY ord DESC"+limitClause(limit),
		[]any{application, service}, scanDesiredState)
	if err != nil {
		return nil, fmt.Errorf("list desired states of %s/%s: %w", application, service, err)
	}
	return store.UnsealAll(out, s.openDesired)
}

const approvalColumns = "desired_state_id, application, service, release_channel, topic, user_name, reject, comment, created_at"

func scanApproval(row interface{ Scan(...any) error }) (store.Approval, error) {
	var a store.Approval
	err := row.Scan(&a.DesiredStateID, &a.Application, &a.Service, &a.ReleaseChannel, &a.Topic, &a.User, &a.Reject,
		&a.Comment, scanTime{&a.CreatedAt})
	return a, err
}

// AddApproval implements store.Store. The write connection runs one
// transaction at a time, so decide sees every approval committed before it
// and none can be added until this transaction ends.
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
	err := s.writeTx(ctx, func(tx *wtx) error {
		ds, err := scanDesiredState(tx.QueryRowContext(ctx, selectDesiredState+" WHERE id = ?", desiredStateID))
		if err != nil {
			return fmt.Errorf("desired state: %w", notFound(err))
		}
		if ds, err = s.openDesired(ds); err != nil {
			return err
		}
		recorded, err := queryAll(ctx, tx, "SELECT "+approvalColumns+" FROM approvals WHERE desired_state_id = ? ORDER BY ord",
			[]any{desiredStateID}, scanApproval)
		if err != nil {
			return err
		}
		a, events, err = decide(ds, recorded)
		if err != nil {
			return err
		}
		if a.DesiredStateID != desiredStateID || a.Topic == "" || a.User == "" {
			return fmt.Errorf("approval of %q topic %q by %q: desired state %s, topic and user are required", a.DesiredStateID, a.Topic, a.User, desiredStateID)
		}
		if a.CreatedAt.IsZero() {
			a.CreatedAt = t
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO approvals ("+approvalColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"+
			" ON CONFLICT (desired_state_id, topic, user_name) DO NOTHING",
			a.DesiredStateID, a.Application, a.Service, a.ReleaseChannel, a.Topic, a.User, a.Reject, a.Comment, dbTime(a.CreatedAt))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("%s of topic %q: %w", a.User, a.Topic, store.ErrDuplicate)
		}
		seqs, err = s.insertEvents(ctx, tx, encodeEvents(events, t))
		return err
	})
	if err != nil {
		return store.Approval{}, fmt.Errorf("add approval to %s: %w", desiredStateID, err)
	}
	setSeqs(events, seqs, t)
	a.CreatedAt = a.CreatedAt.UTC()
	return a, nil
}

// ListApprovals implements store.Store.
func (s *Store) ListApprovals(ctx context.Context, desiredStateID string) ([]store.Approval, error) {
	out, err := queryAll(ctx, s.reads, "SELECT "+approvalColumns+" FROM approvals WHERE desired_state_id = ? ORDER BY ord",
		[]any{desiredStateID}, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("list approvals of %s: %w", desiredStateID, err)
	}
	return out, nil
}
