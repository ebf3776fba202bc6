package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/drover-dev/drover/internal/store"
)

// API tokens and the audit log (tables api_tokens and audit, migration
// 0014). Creating and revoking a token, and every audit record, are durable
// writes (what people do); a token's last use is the store's bookkeeping,
// crash safe only.

//nolint:gosec // G101: column names, not a credential.
const tokenColumns = "id, name, hash, roles, created_by, created_at, expires_at, revoked_at, revoked_by, last_used_at"

func scanToken(row interface{ Scan(...any) error }) (store.APIToken, error) {
	var t store.APIToken
	err := row.Scan(&t.ID, &t.Name, &t.Hash, scanJSON{V: &t.Roles}, &t.CreatedBy, scanTime{&t.CreatedAt}, scanTime{&t.ExpiresAt},
		scanTime{&t.RevokedAt}, &t.RevokedBy, scanTime{&t.LastUsedAt})
	return t, err
}

// isUnique reports whether err is a unique constraint's refusal.
func isUnique(err error) bool {
	var se *sqlite3.Error
	return errors.As(err, &se) && se.Code() == sqlitelib.SQLITE_CONSTRAINT_UNIQUE
}

// CreateAPIToken implements store.Store.
func (s *Store) CreateAPIToken(ctx context.Context, t store.APIToken) (store.APIToken, error) {
	if t.Name == "" || t.Hash == "" {
		return store.APIToken{}, fmt.Errorf("create api token %q: name and hash are required", t.Name)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	t.RevokedAt, t.RevokedBy, t.LastUsedAt = time.Time{}, "", time.Time{}
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO api_tokens (name, hash, roles, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
			t.Name, t.Hash, dbStrings(t.Roles), t.CreatedBy, dbTime(t.CreatedAt), dbTime(t.ExpiresAt))
		if isUnique(err) {
			if strings.Contains(err.Error(), "api_tokens.hash") {
				return fmt.Errorf("a token has the same hash: %w", store.ErrConflict)
			}
			return fmt.Errorf("a token named %s exists (revoke it first): %w", t.Name, store.ErrConflict)
		}
		if err != nil {
			return err
		}
		t.ID, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return store.APIToken{}, fmt.Errorf("create api token %s: %w", t.Name, err)
	}
	t.CreatedAt, t.ExpiresAt = t.CreatedAt.UTC(), t.ExpiresAt.UTC()
	return t, nil
}

// APITokenByHash implements store.Store.
func (s *Store) APITokenByHash(ctx context.Context, hash string) (store.APIToken, error) {
	t, err := scanToken(s.reads.QueryRowContext(ctx, "SELECT "+tokenColumns+" FROM api_tokens WHERE hash = ?", hash))
	if err != nil {
		// The hash is a credential's: it is not repeated in the error.
		return store.APIToken{}, fmt.Errorf("api token by hash: %w", notFound(err))
	}
	return t, nil
}

// ListAPITokens implements store.Store.
func (s *Store) ListAPITokens(ctx context.Context) ([]store.APIToken, error) {
	out, err := queryAll(ctx, s.reads, "SELECT "+tokenColumns+" FROM api_tokens ORDER BY id", nil, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list api tokens: %w", err)
	}
	return out, nil
}

// RevokeAPIToken implements store.Store.
func (s *Store) RevokeAPIToken(ctx context.Context, name, by string) (store.APIToken, error) {
	var t store.APIToken
	err := s.writeTx(ctx, func(tx *wtx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, "SELECT "+tokenColumns+" FROM api_tokens WHERE name = ? AND revoked_at IS NULL", name))
		if err != nil {
			return notFound(err)
		}
		t.RevokedAt, t.RevokedBy = now(), by
		_, err = tx.ExecContext(ctx, "UPDATE api_tokens SET revoked_at = ?, revoked_by = ? WHERE id = ?", dbTime(t.RevokedAt), by, t.ID)
		return err
	})
	if err != nil {
		return store.APIToken{}, fmt.Errorf("revoke api token %s: %w", name, err)
	}
	return t, nil
}

// TouchAPIToken implements store.Store. Times are compared as stored text,
// which sorts as they do.
func (s *Store) TouchAPIToken(ctx context.Context, id int64, at time.Time) error {
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, "UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
			dbTime(at), id, dbTime(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("touch api token %d: %w", id, err)
	}
	return nil
}

const auditColumns = "seq, time, identity, identity_kind, source, action, application, service, release_channel, target, status, outcome, message"

func scanAudit(row interface{ Scan(...any) error }) (store.AuditRecord, error) {
	var r store.AuditRecord
	err := row.Scan(&r.Seq, scanTime{&r.Time}, &r.Identity, &r.IdentityKind, &r.Source, &r.Action, &r.Application, &r.Service,
		&r.ReleaseChannel, &r.Target, &r.Status, &r.Outcome, &r.Message)
	return r, err
}

// AppendAudit implements store.Store.
func (s *Store) AppendAudit(ctx context.Context, r store.AuditRecord) (int64, error) {
	if err := r.Check(); err != nil {
		return 0, err
	}
	var seq int64
	err := s.writeTx(ctx, func(tx *wtx) (err error) {
		seq, err = insertAudit(ctx, tx, r)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append audit record: %w", err)
	}
	return seq, nil
}

// insertAudit appends r (checked) in tx and returns its seq; a zero Time is
// the current time.
func insertAudit(ctx context.Context, tx *wtx, r store.AuditRecord) (int64, error) {
	if r.Time.IsZero() {
		r.Time = now()
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO audit (time, identity, identity_kind, source, action, application, service, release_channel, target, status, outcome, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		dbTime(r.Time), r.Identity, r.IdentityKind, r.Source, r.Action, r.Application, r.Service, r.ReleaseChannel, r.Target, r.Status, r.Outcome, r.Message)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// ListAudit implements store.Store.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditRecord, error) {
	q := "SELECT " + auditColumns + " FROM audit WHERE seq > ?"
	args := []any{f.AfterSeq}
	if f.Application != "" {
		q += " AND application = ?"
		args = append(args, f.Application)
	}
	if f.Identity != "" {
		q += " AND identity = ?"
		args = append(args, f.Identity)
	}
	if !f.Since.IsZero() {
		q += " AND time >= ?"
		args = append(args, dbTime(f.Since))
	}
	q += " ORDER BY seq"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	out, err := queryAll(ctx, s.reads, q, args, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit records: %w", err)
	}
	return out, nil
}
