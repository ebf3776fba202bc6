package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

var (
	_ dump.Exporter = (*Store)(nil)
	_ dump.Importer = (*Store)(nil)
)

// Export implements dump.Exporter. Every table is read in one REPEATABLE
// READ, READ ONLY transaction, whose snapshot is the database as of its
// first query: servers sharing the database may go on writing, and the dump
// holds none of what they commit meanwhile (events and audit records commit
// in seq order, so the snapshot holds every one up to its newest). Processes
// are not exported, and neither are sessions (short-lived credentials: after
// a move or a restore people sign in again).
func (s *Store) Export(ctx context.Context, emit func(dump.Record) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export: begin the read transaction: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
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
			return each(ctx, tx, sqlcore.SelectFacts, func(row scanner) (store.RuntimeFacts, error) { return sqlcore.ScanFacts(dialect{}, row) },
				func(f store.RuntimeFacts) error { return emit(dump.RuntimeFacts(f)) })
		}},
		{"linked runtimes", func() error {
			return each(ctx, tx, sqlcore.SelectLinked, func(row scanner) (store.LinkedRuntime, error) { return sqlcore.ScanLinked(dialect{}, row) },
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
				func(row scanner) (sqlcore.SecretRow, error) { return sqlcore.ScanSecretRow(dialect{}, row) },
				func(r sqlcore.SecretRow) error { return emit(dump.SecretOf(r.Secret, r.DeletedAt)) })
		}},
		{"notification targets", func() error {
			return each(ctx, tx, sqlcore.SelectNotifyTargets,
				func(row scanner) (store.NotifyTarget, error) { return sqlcore.ScanNotifyTarget(dialect{}, row) },
				func(t store.NotifyTarget) error { return emit(dump.NotifyTarget(t)) })
		}},
		{"deliveries", func() error {
			return each(ctx, tx, sqlcore.SelectDeliveryRows,
				func(row scanner) (sqlcore.DeliveryRow, error) { return sqlcore.ScanDeliveryRow(dialect{}, row) },
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
func exportDesiredStates(ctx context.Context, tx pgx.Tx, emit func(dump.Record) error) error {
	const q = "SELECT d.id, d.application, d.service, d.version, d.config_version, c.compiled, d.params, d.rollback," +
		" d.release_channels, d.created_by, d.created_at, COALESCE(d.replaced_by, ''), d.pruned_at, COALESCE(d.compiled_from, '')" +
		" FROM desired_states d LEFT JOIN desired_state_compiled c ON c.id = d.id ORDER BY d.ord"
	type row struct {
		ds   store.DesiredState
		from string
	}
	scan := func(r scanner) (row, error) {
		var out row
		var err error
		out.ds, err = scanDesiredState(extraColumns{r, []any{&out.from}})
		return out, err
	}
	return each(ctx, tx, q, scan, func(r row) error {
		return emit(dump.FromDesiredState(r.ds, r.ds.Compiled, r.from))
	})
}

// extraColumns scans a row's last columns into extra, after those its
// caller scans.
type extraColumns struct {
	row   scanner
	extra []any
}

func (e extraColumns) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }

// each runs q in tx and calls fn with each row as scan reads it.
func each[T any](ctx context.Context, tx pgx.Tx, q string, scan func(scanner) (T, error), fn func(T) error) error {
	rows, err := tx.Query(ctx, q)
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

// dumpTables are the tables an import requires empty (and locks), with the
// kind of record each holds. The other tables are not dumped:
// schema_migrations, replicas (the servers up now) and sessions (short-lived
// credentials, which an import deletes).
var dumpTables = []struct {
	table string
	kind  dump.Kind
}{
	{"configs", dump.KindConfig},
	{"desired_states", dump.KindDesiredState},
	{"desired_state_compiled", dump.KindDesiredState},
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

// importBatch is how many statements an import sends per round trip.
const importBatch = 500

// Import implements dump.Importer, in one READ COMMITTED transaction (not
// run again on a deadlock: the records cannot be read twice). It first
// locks every table of dumpTables, and sessions, IN EXCLUSIVE MODE, so no
// server sharing the database writes while it checks that they are empty
// and loads them (readers go on), and deletes every session (not dumped:
// what sessions the database held were issued before the import and do not
// survive it; people sign in again, as after a restore). It sends the
// inserts in batches. Events, task runs, tasks, API tokens, audit records
// and deliveries are inserted with their ids (OVERRIDING SYSTEM VALUE),
// desired states and approvals in their order of creation; then the
// identity sequences of events.seq, task_runs.id, tasks.id, api_tokens.id,
// audit.seq and notify_deliveries.id are set to the largest imported id (or
// kept, when already past it), so later inserts continue after it.
func (s *Store) Import(ctx context.Context, next func() (dump.Record, error)) error {
	err := s.health.wrote(s.runTx(ctx, func(tx pgx.Tx) error {
		if err := lockAndCheckEmpty(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM sessions"); err != nil {
			return fmt.Errorf("delete the sessions: %w", err)
		}
		im := &importer{tx: tx, batch: &pgx.Batch{}}
		for {
			rec, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if err := im.put(ctx, rec); err != nil {
				return err
			}
		}
		if err := im.flush(ctx); err != nil {
			return err
		}
		for _, seq := range []struct {
			table, column string
			max           int64
		}{
			{"events", "seq", im.maxSeq}, {"task_runs", "id", im.maxRun}, {"tasks", "id", im.maxTask},
			{"api_tokens", "id", im.maxToken}, {"audit", "seq", im.maxAudit},
			{"notify_deliveries", "id", im.maxDelivery},
		} {
			if err := raiseSequence(ctx, tx, seq.table, seq.column, seq.max); err != nil {
				return fmt.Errorf("raise the sequence of %s.%s to %d: %w", seq.table, seq.column, seq.max, err)
			}
		}
		return nil
	}))
	return conflict(err)
}

// lockAndCheckEmpty locks the tables of dumpTables and sessions against
// writes until the transaction ends and fails with dump.ErrNotEmpty unless
// the tables of dumpTables are empty.
func lockAndCheckEmpty(ctx context.Context, tx pgx.Tx) error {
	tables := make([]string, len(dumpTables), len(dumpTables)+1)
	counts := make([]string, len(dumpTables))
	for i, t := range dumpTables {
		tables[i] = t.table
		counts[i] = "(SELECT count(*) FROM " + t.table + ")"
	}
	tables = append(tables, "sessions")
	if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(tables, ", ")+" IN EXCLUSIVE MODE"); err != nil {
		return fmt.Errorf("lock the tables: %w", err)
	}
	n := make([]int64, len(dumpTables))
	dest := make([]any, len(n))
	for i := range n {
		dest[i] = &n[i]
	}
	if err := tx.QueryRow(ctx, "SELECT "+strings.Join(counts, ", ")).Scan(dest...); err != nil {
		return fmt.Errorf("count the records of the target store: %w", err)
	}
	held := dump.Counts{}
	for i, t := range dumpTables {
		if n[i] > 0 {
			// desired_state_compiled counts desired states again.
			held[t.kind] = max(held[t.kind], int(n[i]))
		}
	}
	if len(held) > 0 {
		return dump.NotEmptyError(held)
	}
	return nil
}

// importer queues the inserts of an import's records.
type importer struct {
	tx    pgx.Tx
	batch *pgx.Batch
	// what names the record of each queued statement, for errors.
	what                    []string
	maxSeq, maxRun, maxTask int64
	maxToken, maxAudit      int64
	maxDelivery             int64
}

const (
	importDesiredState = "INSERT INTO desired_states (id, application, service, version, config_version, params, rollback," +
		" release_channels, created_by, created_at, replaced_by, compiled_from, pruned_at)" +
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
	importEvent = "INSERT INTO events (" + eventColumns + ") OVERRIDING SYSTEM VALUE" +
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
	importRun = "INSERT INTO task_runs (" + runColumns + ") OVERRIDING SYSTEM VALUE" +
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
	importTask = "INSERT INTO tasks (" + taskColumns + ") OVERRIDING SYSTEM VALUE" +
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
	importDelivery = sqlcore.InsertDeliveryRow + " OVERRIDING SYSTEM VALUE" + sqlcore.DeliveryRowValues
)

// importInstance inserts an instance as it was, revision included.
var importInstance = "INSERT INTO instances (" + instanceColumns + ") VALUES (" + instanceParams + ")"

// queue adds a statement for the record what names, sending the batch once
// it is full.
func (im *importer) queue(ctx context.Context, what, sql string, args ...any) error {
	im.batch.Queue(sql, args...)
	im.what = append(im.what, what)
	if im.batch.Len() >= importBatch {
		return im.flush(ctx)
	}
	return nil
}

// flush sends the queued statements; an error names the first record that
// failed.
func (im *importer) flush(ctx context.Context) error {
	if im.batch.Len() == 0 {
		return nil
	}
	res := im.tx.SendBatch(ctx, im.batch)
	var err error
	for _, what := range im.what {
		if _, err = res.Exec(); err != nil {
			err = fmt.Errorf("%s: %w", what, err)
			break
		}
	}
	if cerr := res.Close(); err == nil && cerr != nil {
		err = cerr
	}
	im.batch, im.what = &pgx.Batch{}, im.what[:0]
	return err
}

// put queues the inserts of one record. Free text is made storable as the
// store's own writes make it (text), keys and names are not.
func (im *importer) put(ctx context.Context, rec dump.Record) error {
	switch r := rec.(type) {
	case dump.Config:
		return im.queue(ctx, fmt.Sprintf("config %s/%s version %d", r.Kind, r.Name, r.Version),
			"INSERT INTO configs ("+configColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7)",
			r.Kind, r.Name, r.Version, r.Body, r.Hash, r.Source, nanos(r.CreatedAt))
	case dump.DesiredState:
		what := fmt.Sprintf("desired state %s of %s/%s", r.ID, r.Application, r.Service)
		if err := im.queue(ctx, what, importDesiredState, r.ID, r.Application, r.Service, r.Version, r.ConfigVersion,
			r.Params, r.Rollback, texts(r.ReleaseChannels), text(r.CreatedBy), nanos(r.CreatedAt), nullString(r.ReplacedBy),
			nullString(r.CompiledFrom), nanos(r.PrunedAt)); err != nil {
			return err
		}
		if r.Compiled == nil {
			return nil
		}
		return im.queue(ctx, what, "INSERT INTO desired_state_compiled (id, compiled) VALUES ($1, $2)", r.ID, r.Compiled)
	case dump.Approval:
		return im.queue(ctx, fmt.Sprintf("approval of %s topic %q by %s", r.DesiredStateID, r.Topic, r.User),
			"INSERT INTO approvals ("+approvalColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			r.DesiredStateID, r.Application, r.Service, r.ReleaseChannel, r.Topic, r.User, r.Reject, text(r.Comment), nanos(r.CreatedAt))
	case dump.Instance:
		return im.queue(ctx, fmt.Sprintf("instance %s/%s/%s", r.Application, r.Service, r.ReleaseChannel), importInstance,
			r.Application, r.Service, r.ReleaseChannel, r.DesiredStateID, r.TargetStateID, r.TargetVersion,
			r.CurrentStateID, r.CurrentVersion, r.Status, r.Reason, text(r.Message), r.Paused, r.ApplyAttempts,
			nanos(r.LastApplyAt), nanos(r.ConvergedAt), nanos(r.UpdatedAt), r.PreviousStateID, r.PreviousVersion,
			r.DesiredVersion, texts(r.Satisfied), r.RollbackFrom, text(r.RollbackReason), r.FailedVersion, r.Healed,
			r.ActionSeq, r.ActionPending, nanos(r.AppliedAt), checksJSON(r.Checks), text(r.RuntimeMemo), r.Revision)
	case dump.Observation:
		what := fmt.Sprintf("observation of %s/%s/%s", r.Application, r.Service, r.ReleaseChannel)
		body, err := json.Marshal(r.Store())
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return im.queue(ctx, what, "INSERT INTO observations (application, service, release_channel, body, since) VALUES ($1, $2, $3, $4, $5)",
			r.Application, r.Service, r.ReleaseChannel, body, nanos(r.Since))
	case dump.Event:
		im.maxSeq = max(im.maxSeq, r.Seq)
		return im.queue(ctx, fmt.Sprintf("event %d", r.Seq), importEvent, r.Seq, nanos(r.Time), r.Application, r.Service,
			r.ReleaseChannel, r.DesiredStateID, r.Type, text(r.Actor), text(r.Message), r.Data)
	case dump.TaskRun:
		im.maxRun = max(im.maxRun, r.ID)
		return im.queue(ctx, fmt.Sprintf("task run %d", r.ID), importRun, r.ID, r.Application, r.Service, r.ReleaseChannel,
			r.Runtime, r.Kind, r.Version, texts(r.Command), r.ExitCode, text(r.Error), nanos(r.StartedAt), nanos(r.FinishedAt),
			raw(string(r.Stdout)), raw(string(r.Stderr)), r.Truncated)
	case dump.Task:
		im.maxTask = max(im.maxTask, r.ID)
		return im.queue(ctx, fmt.Sprintf("task %d", r.ID), importTask, r.ID, r.Key, r.Instance, r.Kind, r.Payload, r.Status,
			r.Owner, r.Token, r.Attempts, nanos(r.Expires), nanos(r.CreatedAt), nanos(r.ClaimedAt), nanos(r.FinishedAt), text(r.Message))
	case dump.Lease:
		return im.queue(ctx, "lease "+r.Key, "INSERT INTO leases (key, owner, token, expires) VALUES ($1, $2, $3, $4)",
			r.Key, r.Owner, r.Token, nanos(r.Expires))
	case dump.RuntimeFacts:
		args, err := sqlcore.FactsArgs(dialect{}, store.RuntimeFacts(r))
		if err != nil {
			return err
		}
		return im.queue(ctx, "facts of runtime "+r.Runtime, bound(sqlcore.InsertFacts), args...)
	case dump.LinkedRuntime:
		what := "linked runtime " + r.Name
		args, err := sqlcore.LinkedArgs(dialect{}, r.Store())
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return im.queue(ctx, what, bound(sqlcore.InsertLinked), args...)
	case dump.APIToken:
		// Named by id and name, never by its hash.
		im.maxToken = max(im.maxToken, r.ID)
		return im.queue(ctx, fmt.Sprintf("api token %d (%s)", r.ID, r.Name), importToken, tokenArgs(r.Store())...)
	case dump.AuditRecord:
		im.maxAudit = max(im.maxAudit, r.Seq)
		return im.queue(ctx, fmt.Sprintf("audit record %d", r.Seq), importAudit, append([]any{r.Seq}, auditArgs(r.Store())...)...)
	case dump.Secret:
		// The value is kept sealed, as dumped; errors never quote it.
		return im.queue(ctx, "secret "+store.SecretVersionName(r.Key, r.Version),
			bound(sqlcore.InsertSecret), sqlcore.SecretArgs(dialect{}, sqlcore.SecretRow{Secret: r.Store(), DeletedAt: r.DeletedAt})...)
	case dump.NotifyTarget:
		// The spec is kept sealed, as dumped; errors never quote it.
		return im.queue(ctx, "notification target "+r.Name, bound(sqlcore.InsertNotifyTarget),
			sqlcore.NotifyTargetArgs(dialect{}, r.Store(), r.Spec)...)
	case dump.Delivery:
		im.maxDelivery = max(im.maxDelivery, r.ID)
		return im.queue(ctx, fmt.Sprintf("delivery %d", r.ID), bound(importDelivery),
			sqlcore.DeliveryRowArgs(dialect{}, sqlcore.DeliveryRow{Delivery: r.Store(), Key: r.Key})...)
	case dump.Process:
		// Processes of the exporting host mean nothing here (see package dump).
		return nil
	}
	return fmt.Errorf("unknown record %T", rec)
}

// nullString is s, or NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// raiseSequence sets the identity sequence of table.column to n unless it
// is past n already, so that the next row inserted gets an id above n.
func raiseSequence(ctx context.Context, tx pgx.Tx, table, column string, n int64) error {
	if n <= 0 {
		return nil
	}
	var name string
	if err := tx.QueryRow(ctx, "SELECT pg_get_serial_sequence($1, $2)", table, column).Scan(&name); err != nil {
		return err
	}
	var last int64
	if err := tx.QueryRow(ctx, "SELECT COALESCE(pg_sequence_last_value($1::regclass), 0)", name).Scan(&last); err != nil {
		return err
	}
	if last >= n {
		return nil
	}
	_, err := tx.Exec(ctx, "SELECT setval($1::regclass, $2)", name, n)
	return err
}
