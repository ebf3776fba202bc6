package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

var (
	_ dump.Exporter = (*Store)(nil)
	_ dump.Importer = (*Store)(nil)
)

// Export implements dump.Exporter. Every table is read in one read
// transaction: in WAL mode it sees the database as of its first read, with
// none of the writes committed meanwhile (a server writing the database goes
// on, but the dump is of one instant; drover admin export takes the data
// directory's lock, so no server writes at all). Processes are not exported,
// and neither are sessions (short-lived credentials: after a move or a
// restore people sign in again).
func (s *Store) Export(ctx context.Context, emit func(dump.Record) error) error {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("export: begin the read transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	steps := []struct {
		what string
		fn   func() error
	}{
		{"configs", func() error {
			return each(ctx, tx, "SELECT "+configColumns+" FROM configs ORDER BY kind, name, version", scanConfig,
				func(c store.ConfigObject) error { return emit(dump.Config(c)) })
		}},
		{"desired states", func() error { return exportDesiredStates(ctx, tx, emit) }},
		{"approvals", func() error {
			return each(ctx, tx, "SELECT "+approvalColumns+" FROM approvals ORDER BY ord", scanApproval,
				func(a store.Approval) error { return emit(dump.Approval(a)) })
		}},
		{"instances", func() error {
			return each(ctx, tx, "SELECT "+instanceColumns+" FROM instances ORDER BY application, service, release_channel", scanInstance,
				func(i store.Instance) error { return emit(dump.Instance(i)) })
		}},
		{"observations", func() error {
			return each(ctx, tx, "SELECT application, service, release_channel, body, since FROM observations ORDER BY application, service, release_channel",
				scanObservation, func(o store.Observation) error { return emit(dump.Observation(o)) })
		}},
		{"events", func() error {
			return each(ctx, tx, "SELECT "+eventColumns+" FROM events ORDER BY seq", scanEvent,
				func(e store.Event) error { return emit(dump.Event(e)) })
		}},
		{"task runs", func() error {
			return each(ctx, tx, "SELECT "+runColumns+" FROM task_runs ORDER BY id", scanRun,
				func(r store.TaskRun) error { return emit(dump.FromTaskRun(r)) })
		}},
		{"tasks", func() error {
			return each(ctx, tx, "SELECT "+taskColumns+" FROM tasks ORDER BY id", scanTask,
				func(t store.Task) error { return emit(dump.Task(t)) })
		}},
		{"leases", func() error {
			return each(ctx, tx, "SELECT key, owner, token, expires FROM leases ORDER BY key", scanLease,
				func(l store.Lease) error { return emit(dump.Lease(l)) })
		}},
		{"runtime facts", func() error {
			return each(ctx, tx, sqlcore.SelectFacts, func(row interface{ Scan(...any) error }) (store.RuntimeFacts, error) {
				return sqlcore.ScanFacts(dialect{}, row)
			},
				func(f store.RuntimeFacts) error { return emit(dump.RuntimeFacts(f)) })
		}},
		{"linked runtimes", func() error {
			return each(ctx, tx, sqlcore.SelectLinked, func(row interface{ Scan(...any) error }) (store.LinkedRuntime, error) {
				return sqlcore.ScanLinked(dialect{}, row)
			},
				func(r store.LinkedRuntime) error { return emit(dump.LinkedRuntime(r)) })
		}},
		{"api tokens", func() error {
			return each(ctx, tx, "SELECT "+tokenColumns+" FROM api_tokens ORDER BY id", scanToken,
				func(t store.APIToken) error { return emit(dump.APIToken(t)) })
		}},
		{"audit records", func() error {
			return each(ctx, tx, "SELECT "+auditColumns+" FROM audit ORDER BY seq", scanAudit,
				func(r store.AuditRecord) error { return emit(dump.AuditRecord(r)) })
		}},
		{"secrets", func() error {
			return each(ctx, tx, sqlcore.SelectSecrets,
				func(row interface{ Scan(...any) error }) (sqlcore.SecretRow, error) {
					return sqlcore.ScanSecretRow(dialect{}, row)
				},
				func(r sqlcore.SecretRow) error { return emit(dump.SecretOf(r.Secret, r.DeletedAt)) })
		}},
		{"notification targets", func() error {
			return each(ctx, tx, sqlcore.SelectNotifyTargets,
				func(row interface{ Scan(...any) error }) (store.NotifyTarget, error) {
					return sqlcore.ScanNotifyTarget(dialect{}, row)
				},
				func(t store.NotifyTarget) error { return emit(dump.NotifyTarget(t)) })
		}},
		{"deliveries", func() error {
			return each(ctx, tx, sqlcore.SelectDeliveryRows,
				func(row interface{ Scan(...any) error }) (sqlcore.DeliveryRow, error) {
					return sqlcore.ScanDeliveryRow(dialect{}, row)
				},
				func(r sqlcore.DeliveryRow) error { return emit(dump.DeliveryOf(r.Delivery, r.Key)) })
		}},
	}
	for _, step := range steps {
		if err := step.fn(); err != nil {
			return fmt.Errorf("export %s: %w", step.what, err)
		}
	}
	return nil
}

// exportDesiredStates emits the desired states in the order they were
// created, each with the compiled copy it holds itself (not one it shares).
func exportDesiredStates(ctx context.Context, tx *sql.Tx, emit func(dump.Record) error) error {
	const q = "SELECT d.id, d.application, d.service, d.version, d.config_version, c.compiled, d.params, d.rollback," +
		" d.release_channels, d.created_by, d.created_at, d.replaced_by, d.pruned_at, d.compiled_from" +
		" FROM desired_states d LEFT JOIN desired_state_compiled c ON c.id = d.id ORDER BY d.ord"
	type row struct {
		ds   store.DesiredState
		from sql.NullString
	}
	scan := func(r interface{ Scan(...any) error }) (row, error) {
		var out row
		var err error
		out.ds, err = scanDesiredState(extraColumns{r, []any{&out.from}})
		return out, err
	}
	return each(ctx, tx, q, scan, func(r row) error {
		return emit(dump.FromDesiredState(r.ds, r.ds.Compiled, r.from.String))
	})
}

// extraColumns scans a row's last columns into extra, after those its
// caller scans.
type extraColumns struct {
	row   interface{ Scan(...any) error }
	extra []any
}

func (e extraColumns) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }

// each runs q in tx and calls fn with each row as scan reads it.
func each[T any](ctx context.Context, tx *sql.Tx, q string, scan func(interface{ Scan(...any) error }) (T, error), fn func(T) error) error {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return rows.Err()
}

// dumpTables are the tables an import requires empty, with the kind of
// record each holds. The other tables are not dumped: schema_migrations,
// sqlite_sequence (raised by an import), desired_state_compiled (with the
// desired states), replicas (the servers up now) and sessions (short-lived
// credentials, which an import deletes).
var dumpTables = []struct {
	table string
	kind  dump.Kind
}{
	{"configs", dump.KindConfig},
	{"desired_states", dump.KindDesiredState},
	{"approvals", dump.KindApproval},
	{"instances", dump.KindInstance},
	{"observations", dump.KindObservation},
	{"events", dump.KindEvent},
	{"task_runs", dump.KindTaskRun},
	{"tasks", dump.KindTask},
	{"leases", dump.KindLease},
	{"runtime_facts", dump.KindRuntimeFacts},
	{"linked_runtimes", dump.KindLinkedRuntime},
	{"api_tokens", dump.KindAPIToken},
	{"audit", dump.KindAudit},
	{"secrets", dump.KindSecret},
	{"notify_targets", dump.KindNotifyTarget},
	{"notify_deliveries", dump.KindDelivery},
	{"processes", dump.KindProcess},
}

// Import implements dump.Importer: in one durable write transaction, which
// first checks that every table of dumpTables is empty and deletes every
// session (not dumped: what sessions the store held were issued before the
// import and do not survive it; people sign in again, as after a restore).
// Records keep their ids: events and audit records their seq, task runs,
// tasks, API tokens and deliveries their id, desired states and approvals
// their order of creation. The AUTOINCREMENT sequences (sqlite_sequence) of
// events, task_runs, tasks, api_tokens, audit and notify_deliveries are
// raised to the largest imported id, so later inserts continue after it.
func (s *Store) Import(ctx context.Context, next func() (dump.Record, error)) error {
	written := s.configs.writing()
	err := s.writeTx(ctx, func(tx *wtx) error {
		if err := checkEmpty(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM sessions"); err != nil {
			return fmt.Errorf("delete the sessions: %w", err)
		}
		var im importer
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if err := im.put(ctx, tx, rec); err != nil {
				return err
			}
		}
		for _, seq := range []struct {
			table string
			max   int64
		}{
			{"events", im.maxSeq}, {"task_runs", im.maxRun}, {"tasks", im.maxTask},
			{"api_tokens", im.maxToken}, {"audit", im.maxAudit}, {"notify_deliveries", im.maxDelivery},
		} {
			if err := raiseSequence(ctx, tx, seq.table, seq.max); err != nil {
				return fmt.Errorf("raise the sequence of %s to %d: %w", seq.table, seq.max, err)
			}
		}
		return nil
	})
	written(nil, err)
	return err
}

// checkEmpty fails with dump.ErrNotEmpty unless every table of dumpTables
// is empty.
func checkEmpty(ctx context.Context, tx *wtx) error {
	counts := make([]string, len(dumpTables))
	for i, t := range dumpTables {
		counts[i] = "(SELECT count(*) FROM " + t.table + ")"
	}
	n := make([]int, len(dumpTables))
	dest := make([]any, len(n))
	for i := range n {
		dest[i] = &n[i]
	}
	if err := tx.QueryRowContext(ctx, "SELECT "+strings.Join(counts, ", ")).Scan(dest...); err != nil {
		return fmt.Errorf("count the records of the target store: %w", err)
	}
	held := dump.Counts{}
	for i, t := range dumpTables {
		if n[i] > 0 {
			held[t.kind] = n[i]
		}
	}
	if len(held) > 0 {
		return dump.NotEmptyError(held)
	}
	return nil
}

// importer writes the records of a dump in an import's transaction.
type importer struct {
	maxSeq, maxRun, maxTask int64
	maxToken, maxAudit      int64
	maxDelivery             int64
}

const (
	importDesiredState = "INSERT INTO desired_states (id, application, service, version, config_version, params, rollback," +
		" release_channels, created_by, created_at, replaced_by, compiled_from, pruned_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	importEvent = "INSERT INTO events (" + eventColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	importRun   = "INSERT INTO task_runs (" + runColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	importTask  = "INSERT INTO tasks (" + taskColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	importToken = "INSERT INTO api_tokens (" + tokenColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	importAudit = "INSERT INTO audit (" + auditColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

// importInstance inserts an instance as it was, revision included.
var importInstance = "INSERT INTO instances (" + instanceColumns + ") VALUES (" +
	strings.TrimSuffix(strings.Repeat("?, ", strings.Count(instanceColumns, ",")+1), ", ") + ")"

// put writes one record.
func (im *importer) put(ctx context.Context, tx *wtx, rec dump.Record) error {
	switch r := rec.(type) {
	case dump.Config:
		_, err := tx.ExecContext(ctx, "INSERT INTO configs ("+configColumns+") VALUES (?, ?, ?, ?, ?, ?, ?)",
			r.Kind, r.Name, r.Version, dbBytes(r.Body), r.Hash, r.Source, dbTime(r.CreatedAt))
		if err != nil {
			return fmt.Errorf("config %s/%s version %d: %w", r.Kind, r.Name, r.Version, err)
		}
	case dump.DesiredState:
		return importDesired(ctx, tx, r)
	case dump.Approval:
		_, err := tx.ExecContext(ctx, "INSERT INTO approvals ("+approvalColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			r.DesiredStateID, r.Application, r.Service, r.ReleaseChannel, r.Topic, r.User, r.Reject, r.Comment, dbTime(r.CreatedAt))
		if err != nil {
			return fmt.Errorf("approval of %s topic %q by %s: %w", r.DesiredStateID, r.Topic, r.User, err)
		}
	case dump.Instance:
		tx.inst.all = true
		_, err := tx.ExecContext(ctx, importInstance,
			r.Application, r.Service, r.ReleaseChannel, r.DesiredStateID, r.TargetStateID, r.TargetVersion,
			r.CurrentStateID, r.CurrentVersion, r.Status, r.Reason, r.Message, r.Paused, r.ApplyAttempts,
			dbTime(r.LastApplyAt), dbTime(r.ConvergedAt), dbTime(r.UpdatedAt), r.PreviousStateID, r.PreviousVersion,
			r.DesiredVersion, dbStrings(r.Satisfied), r.RollbackFrom, r.RollbackReason, r.FailedVersion, r.Healed,
			r.ActionSeq, r.ActionPending, dbTime(r.AppliedAt), dbChecks(r.Checks), r.RuntimeMemo, r.Revision)
		if err != nil {
			return fmt.Errorf("instance %s/%s/%s: %w", r.Application, r.Service, r.ReleaseChannel, err)
		}
	case dump.Observation:
		return importObservation(ctx, tx, r)
	case dump.Event:
		_, err := tx.ExecContext(ctx, importEvent, r.Seq, dbTime(r.Time), r.Application, r.Service, r.ReleaseChannel,
			r.DesiredStateID, r.Type, r.Actor, r.Message, dbBytes(r.Data))
		if err != nil {
			return fmt.Errorf("event %d: %w", r.Seq, err)
		}
		im.maxSeq = max(im.maxSeq, r.Seq)
	case dump.TaskRun:
		cmd, err := dbCommand(r.Command)
		if err == nil {
			_, err = tx.ExecContext(ctx, importRun, r.ID, r.Application, r.Service, r.ReleaseChannel, r.Runtime, r.Kind,
				r.Version, cmd, r.ExitCode, r.Error, dbTime(r.StartedAt), dbTime(r.FinishedAt), string(r.Stdout),
				string(r.Stderr), r.Truncated)
		}
		if err != nil {
			return fmt.Errorf("task run %d: %w", r.ID, err)
		}
		im.maxRun = max(im.maxRun, r.ID)
	case dump.Task:
		_, err := tx.ExecContext(ctx, importTask, r.ID, r.Key, r.Instance, r.Kind, dbBytes(r.Payload), r.Status, r.Owner,
			r.Token, r.Attempts, dbTime(r.Expires), dbTime(r.CreatedAt), dbTime(r.ClaimedAt), dbTime(r.FinishedAt), r.Message)
		if err != nil {
			return fmt.Errorf("task %d: %w", r.ID, err)
		}
		if r.Status.Open() {
			tx.noteTask(r.Key, r.Instance, r.ID, true)
		}
		im.maxTask = max(im.maxTask, r.ID)
	case dump.Lease:
		_, err := tx.ExecContext(ctx, "INSERT INTO leases (key, owner, token, expires) VALUES (?, ?, ?, ?)",
			r.Key, r.Owner, r.Token, dbTime(r.Expires))
		if err != nil {
			return fmt.Errorf("lease %s: %w", r.Key, err)
		}
		tx.noteLease(r.Key, r.Token)
	case dump.RuntimeFacts:
		args, err := sqlcore.FactsArgs(dialect{}, store.RuntimeFacts(r))
		if err == nil {
			_, err = tx.ExecContext(ctx, sqlcore.InsertFacts, args...)
		}
		if err != nil {
			return fmt.Errorf("facts of runtime %s: %w", r.Runtime, err)
		}
	case dump.LinkedRuntime:
		args, err := sqlcore.LinkedArgs(dialect{}, r.Store())
		if err == nil {
			_, err = tx.ExecContext(ctx, sqlcore.InsertLinked, args...)
		}
		if err != nil {
			return fmt.Errorf("linked runtime %s: %w", r.Name, err)
		}
	case dump.APIToken:
		_, err := tx.ExecContext(ctx, importToken, r.ID, r.Name, r.Hash, dbStrings(r.Roles), r.CreatedBy, dbTime(r.CreatedAt),
			dbTime(r.ExpiresAt), dbTime(r.RevokedAt), r.RevokedBy, dbTime(r.LastUsedAt))
		if err != nil {
			// The error names the token by id and name, never by its hash.
			return fmt.Errorf("api token %d (%s): %w", r.ID, r.Name, err)
		}
		im.maxToken = max(im.maxToken, r.ID)
	case dump.AuditRecord:
		_, err := tx.ExecContext(ctx, importAudit, r.Seq, dbTime(r.Time), r.Identity, r.IdentityKind, r.Source, r.Action,
			r.Application, r.Service, r.ReleaseChannel, r.Target, r.Status, r.Outcome, r.Message)
		if err != nil {
			return fmt.Errorf("audit record %d: %w", r.Seq, err)
		}
		im.maxAudit = max(im.maxAudit, r.Seq)
	case dump.Secret:
		// The value is kept sealed, as dumped; errors never quote it.
		_, err := tx.ExecContext(ctx, sqlcore.InsertSecret, sqlcore.SecretArgs(dialect{}, sqlcore.SecretRow{Secret: r.Store(), DeletedAt: r.DeletedAt})...)
		if err != nil {
			return fmt.Errorf("secret %s: %w", store.SecretVersionName(r.Key, r.Version), err)
		}
	case dump.NotifyTarget:
		// The spec is kept sealed, as dumped; errors never quote it.
		_, err := tx.ExecContext(ctx, sqlcore.InsertNotifyTarget, sqlcore.NotifyTargetArgs(dialect{}, r.Store(), r.Spec)...)
		if err != nil {
			return fmt.Errorf("notification target %s: %w", r.Name, err)
		}
	case dump.Delivery:
		_, err := tx.ExecContext(ctx, sqlcore.InsertDeliveryRow+sqlcore.DeliveryRowValues,
			sqlcore.DeliveryRowArgs(dialect{}, sqlcore.DeliveryRow{Delivery: r.Store(), Key: r.Key})...)
		if err != nil {
			return fmt.Errorf("delivery %d: %w", r.ID, err)
		}
		im.maxDelivery = max(im.maxDelivery, r.ID)
	case dump.Process:
		// Processes of the exporting host mean nothing here (see package dump).
	default:
		return fmt.Errorf("unknown record %T", rec)
	}
	return nil
}

// importDesired inserts a desired state and, when it holds one, its
// compiled copy.
func importDesired(ctx context.Context, tx *wtx, r dump.DesiredState) error {
	var channels any
	if len(r.ReleaseChannels) > 0 {
		b, err := json.Marshal(r.ReleaseChannels)
		if err != nil {
			return fmt.Errorf("desired state %s: %w", r.ID, err)
		}
		channels = string(b)
	}
	tx.inst.all = true
	_, err := tx.ExecContext(ctx, importDesiredState, r.ID, r.Application, r.Service, r.Version, r.ConfigVersion,
		dbBytes(r.Params), r.Rollback, channels, r.CreatedBy, dbTime(r.CreatedAt), nullString(r.ReplacedBy),
		nullString(r.CompiledFrom), dbTime(r.PrunedAt))
	if err == nil && r.Compiled != nil {
		_, err = tx.ExecContext(ctx, "INSERT INTO desired_state_compiled (id, compiled) VALUES (?, ?)", r.ID, r.Compiled)
	}
	if err != nil {
		return fmt.Errorf("desired state %s of %s/%s: %w", r.ID, r.Application, r.Service, err)
	}
	return nil
}

// importObservation inserts an observation, its body encoded as
// putObservations does.
func importObservation(ctx context.Context, tx *wtx, r dump.Observation) error {
	body, err := json.Marshal(r.Store())
	if err == nil {
		_, err = tx.ExecContext(ctx, "INSERT INTO observations (application, service, release_channel, body, since) VALUES (?, ?, ?, ?, ?)",
			r.Application, r.Service, r.ReleaseChannel, body, dbTime(r.Since))
	}
	if err != nil {
		return fmt.Errorf("observation of %s/%s/%s: %w", r.Application, r.Service, r.ReleaseChannel, err)
	}
	return nil
}

// nullString is s, or NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// raiseSequence makes the AUTOINCREMENT sequence of table at least n, so
// that the next row inserted gets an id above n (inserting rows with their
// ids raises it already; this makes sure).
func raiseSequence(ctx context.Context, tx *wtx, table string, n int64) error {
	if n <= 0 {
		return nil
	}
	var cur int64
	err := tx.QueryRowContext(ctx, "SELECT seq FROM sqlite_sequence WHERE name = ?", table).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", table, n)
		return err
	case err != nil:
		return err
	case cur < n:
		_, err = tx.ExecContext(ctx, "UPDATE sqlite_sequence SET seq = ? WHERE name = ?", n, table)
		return err
	}
	return nil
}
