package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/internal/store"
)

// API tokens and the audit log (tables api_tokens and audit, migration
// 0005). Each token method is one statement: the unique hash and the partial
// unique index on the names of live tokens decide conflicts
// (store.ErrConflict), so concurrent creates of one name have one winner, and
// a revoke is an UPDATE of the live row, so concurrent revokes have one too.
// An audit record is appended in a short transaction that takes the advisory
// lock auditLock first, so that seqs commit in order (see doc.go).
//
// Every write here is durable: the store commits all its writes durably,
// also a token's last use, which the SQLite store commits crash safe only.
//
// A token's hash is a credential's: no error message repeats it. (The
// messages of PostgreSQL's errors quote no values; the detail of a unique
// violation does, and CreateAPIToken does not wrap that error.)

// tokenColumns are the columns of api_tokens, in the order scanToken reads
// them.
const tokenColumns = "id, name, hash, roles, created_by, created_at, expires_at, revoked_at, revoked_by, last_used_at" //nolint:gosec // G101 false positive: column names, not a credential

// scanToken scans a row of tokenColumns.
func scanToken(row scanner) (store.APIToken, error) {
	var t store.APIToken
	err := row.Scan(&t.ID, &t.Name, &t.Hash, &t.Roles, &t.CreatedBy, at(&t.CreatedAt), at(&t.ExpiresAt),
		at(&t.RevokedAt), &t.RevokedBy, at(&t.LastUsedAt))
	return t, err
}

// tokenArgs are t's values for the columns of tokenColumns, in order. Names
// are not cleaned (an invalid one fails the write); who created and revoked
// it are text.
func tokenArgs(t store.APIToken) []any {
	return []any{t.ID, t.Name, t.Hash, texts(t.Roles), text(t.CreatedBy), nanos(t.CreatedAt), nanos(t.ExpiresAt),
		nanos(t.RevokedAt), text(t.RevokedBy), nanos(t.LastUsedAt)}
}

const (
	// insertToken creates a token: the columns of tokenColumns but id, which
	// the identity draws, and the revocation and last use, which are unset.
	insertToken = "INSERT INTO api_tokens (name, hash, roles, created_by, created_at, expires_at)" +
		" VALUES ($1, $2, $3, $4, $5, $6) RETURNING id"
	// importToken inserts a token as it was, id included (dump imports).
	importToken = "INSERT INTO api_tokens (" + tokenColumns + ") OVERRIDING SYSTEM VALUE" +
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
)

// tokenConflict is conflict, saying which of a token's unique keys (the name
// of a live token, or the hash) another token holds. It does not wrap
// PostgreSQL's error, whose detail quotes the key's value.
func tokenConflict(name string, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != codeUniqueViolation {
		return err
	}
	if pe.ConstraintName == "api_tokens_live_name" {
		return fmt.Errorf("a token named %s exists (revoke it first): %w", name, store.ErrConflict)
	}
	return fmt.Errorf("a token has the same hash: %w", store.ErrConflict)
}

// CreateAPIToken implements store.Store. The revocation and last use of t
// are ignored: a new token has neither.
func (s *Store) CreateAPIToken(ctx context.Context, t store.APIToken) (store.APIToken, error) {
	if t.Name == "" || t.Hash == "" {
		return store.APIToken{}, fmt.Errorf("create api token %q: name and hash are required", t.Name)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	t.RevokedAt, t.RevokedBy, t.LastUsedAt = time.Time{}, "", time.Time{}
	err := s.pool.QueryRow(ctx, insertToken, t.Name, t.Hash, texts(t.Roles), text(t.CreatedBy), nanos(t.CreatedAt),
		nanos(t.ExpiresAt)).Scan(&t.ID)
	if err := s.health.wrote(err); err != nil {
		return store.APIToken{}, fmt.Errorf("create api token %s: %w", t.Name, tokenConflict(t.Name, err))
	}
	t.CreatedAt, t.ExpiresAt = t.CreatedAt.UTC(), t.ExpiresAt.UTC()
	return t, nil
}

// APITokenByHash implements store.Store.
func (s *Store) APITokenByHash(ctx context.Context, hash string) (store.APIToken, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, "SELECT "+tokenColumns+" FROM api_tokens WHERE hash = $1", hash))
	if err != nil {
		return store.APIToken{}, fmt.Errorf("api token by hash: %w", notFound(err))
	}
	return t, nil
}

// ListAPITokens implements store.Store: every token, by id.
func (s *Store) ListAPITokens(ctx context.Context) ([]store.APIToken, error) {
	out, err := queryAll(ctx, s.pool, "SELECT "+tokenColumns+" FROM api_tokens ORDER BY id", nil, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list api tokens: %w", err)
	}
	return out, nil
}

// RevokeAPIToken implements store.Store with one UPDATE of the live token
// named name. A concurrent revoke of the same token waits for this one and
// then finds no live token: it fails with store.ErrNotFound.
func (s *Store) RevokeAPIToken(ctx context.Context, name, by string) (store.APIToken, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, "UPDATE api_tokens SET revoked_at = $2, revoked_by = $3"+
		" WHERE name = $1 AND revoked_at IS NULL RETURNING "+tokenColumns, name, nanos(now()), text(by)))
	err = s.health.wrote(err)
	if err != nil {
		return store.APIToken{}, fmt.Errorf("revoke api token %s: %w", name, notFound(err))
	}
	return t, nil
}

// TouchAPIToken implements store.Store. An unknown id, or a time not after
// the one recorded, changes nothing.
func (s *Store) TouchAPIToken(ctx context.Context, id int64, used time.Time) error {
	_, err := s.pool.Exec(ctx, "UPDATE api_tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)",
		id, nanos(used))
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("touch api token %d: %w", id, err)
	}
	return nil
}

// auditColumns are the columns of audit, in the order scanAudit reads them.
const auditColumns = "seq, time, identity, identity_kind, source, action, application, service, release_channel, target, status, outcome, message"

// scanAudit scans a row of auditColumns.
func scanAudit(row scanner) (store.AuditRecord, error) {
	var r store.AuditRecord
	err := row.Scan(&r.Seq, at(&r.Time), &r.Identity, &r.IdentityKind, &r.Source, &r.Action, &r.Application, &r.Service,
		&r.ReleaseChannel, &r.Target, &r.Status, &r.Outcome, &r.Message)
	return r, err
}

// auditArgs are r's values for the columns of auditColumns but seq, in
// order. Every field is text (see text): a request is recorded whatever it
// named, also names PostgreSQL could not hold (a refused request may carry
// any bytes in its path), rather than losing its record.
func auditArgs(r store.AuditRecord) []any {
	return []any{nanos(r.Time), text(r.Identity), text(r.IdentityKind), text(r.Source), text(r.Action), text(r.Application),
		text(r.Service), text(r.ReleaseChannel), text(r.Target), r.Status, text(r.Outcome), text(r.Message)}
}

const (
	// insertAudit appends a record; the identity draws its seq.
	insertAudit = "INSERT INTO audit (time, identity, identity_kind, source, action, application, service, release_channel," +
		" target, status, outcome, message) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING seq"
	// importAudit inserts a record as it was, seq included (dump imports).
	importAudit = "INSERT INTO audit (" + auditColumns + ") OVERRIDING SYSTEM VALUE" +
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
)

// AppendAudit implements store.Store. The record is inserted in a
// transaction that first takes the advisory lock auditLock and holds it
// until it commits, so appends draw their seqs and commit one after
// another, as events do: a reader that sees a record sees every record with
// a smaller seq. The lock and the insert go in one round trip.
func (s *Store) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	if err := r.Check(); err != nil {
		return 0, err
	}
	var seq int64
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		seq, err = appendAudit(ctx, tx, r)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append audit record of %s: %w", r.Action, err)
	}
	return seq, nil
}

// appendAudit appends r (checked) in tx and returns its seq; a zero Time is
// the current time. It takes auditLock, which tx then holds to its end, so
// that seqs commit in order.
func appendAudit(ctx context.Context, tx pgx.Tx, r store.AuditRecord) (seq int64, err error) {
	if r.Time.IsZero() {
		r.Time = now()
	}
	batch := &pgx.Batch{}
	batch.Queue("SELECT pg_advisory_xact_lock($1)", auditLock)
	batch.Queue(insertAudit, auditArgs(r)...)
	res := tx.SendBatch(ctx, batch)
	if _, err = res.Exec(); err != nil {
		err = fmt.Errorf("lock the audit log: %w", err)
	} else {
		err = res.QueryRow().Scan(&seq)
	}
	if cerr := res.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return seq, err
}

// ListAudit implements store.Store. The names filtered on are made text as
// AppendAudit stores them.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditRecord, error) {
	where := []string{"seq > $1"}
	args := []any{f.AfterSeq}
	if f.Application != "" {
		args = append(args, text(f.Application))
		where = append(where, fmt.Sprintf("application = $%d", len(args)))
	}
	if f.Identity != "" {
		args = append(args, text(f.Identity))
		where = append(where, fmt.Sprintf("identity = $%d", len(args)))
	}
	if !f.Since.IsZero() {
		args = append(args, nanos(f.Since))
		where = append(where, fmt.Sprintf("time >= $%d", len(args)))
	}
	args = append(args, limitArg(f.Limit))
	q := fmt.Sprintf("SELECT %s FROM audit WHERE %s ORDER BY seq LIMIT $%d", auditColumns, strings.Join(where, " AND "), len(args))
	out, err := queryAll(ctx, s.pool, q, args, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit records: %w", err)
	}
	return out, nil
}
