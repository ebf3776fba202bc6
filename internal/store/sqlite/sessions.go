package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// Sessions (table sessions, migration 0015): the people signed in through
// the OpenID provider. Creating and revoking a session are durable writes
// (what people do); a session's last use and the deletion of ended sessions
// are the store's bookkeeping, crash safe only (a deletion lost to a crash
// is done again by the next one, and the sessions it held had ended).
//
// A session's hash is a credential's: no error message repeats it.

const sessionColumns = "id, hash, identity, subject, roles, groups, via, source, created_at, expires_at, revoked_at, revoked_by, last_used_at"

func scanSession(row interface{ Scan(...any) error }) (store.Session, error) {
	var s store.Session
	err := row.Scan(&s.ID, &s.Hash, &s.Identity, &s.Subject, scanJSON{V: &s.Roles}, scanJSON{V: &s.Groups}, &s.Via, &s.Source,
		scanTime{&s.CreatedAt}, scanTime{&s.ExpiresAt}, scanTime{&s.RevokedAt}, &s.RevokedBy, scanTime{&s.LastUsedAt})
	return s, err
}

// CreateSession implements store.Store. The revocation and last use of ss
// are ignored: a new session has neither.
func (s *Store) CreateSession(ctx context.Context, ss store.Session) (store.Session, error) {
	if ss.Hash == "" || ss.Identity == "" || ss.ExpiresAt.IsZero() {
		return store.Session{}, fmt.Errorf("create session of %q: hash, identity and expiry are required", ss.Identity)
	}
	if ss.CreatedAt.IsZero() {
		ss.CreatedAt = now()
	}
	ss.RevokedAt, ss.RevokedBy, ss.LastUsedAt = time.Time{}, "", time.Time{}
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO sessions (hash, identity, subject, roles, groups, via, source, created_at, expires_at)"+
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			ss.Hash, ss.Identity, ss.Subject, dbStrings(ss.Roles), dbStrings(ss.Groups), ss.Via, ss.Source,
			dbTime(ss.CreatedAt), dbTime(ss.ExpiresAt))
		if isUnique(err) {
			// The only unique key besides the id is the hash.
			return fmt.Errorf("a session has the same hash: %w", store.ErrConflict)
		}
		if err != nil {
			return err
		}
		ss.ID, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return store.Session{}, fmt.Errorf("create session of %s: %w", ss.Identity, err)
	}
	ss.CreatedAt, ss.ExpiresAt = ss.CreatedAt.UTC(), ss.ExpiresAt.UTC()
	return ss, nil
}

// SessionByHash implements store.Store.
func (s *Store) SessionByHash(ctx context.Context, hash string) (store.Session, error) {
	ss, err := scanSession(s.reads.QueryRowContext(ctx, "SELECT "+sessionColumns+" FROM sessions WHERE hash = ?", hash))
	if err != nil {
		// The hash is a credential's: it is not repeated in the error.
		return store.Session{}, fmt.Errorf("session by hash: %w", notFound(err))
	}
	return ss, nil
}

// ListSessions implements store.Store.
func (s *Store) ListSessions(ctx context.Context) ([]store.Session, error) {
	out, err := queryAll(ctx, s.reads, "SELECT "+sessionColumns+" FROM sessions ORDER BY id", nil, scanSession)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// RevokeSession implements store.Store.
func (s *Store) RevokeSession(ctx context.Context, id int64, by string) (store.Session, error) {
	var ss store.Session
	err := s.writeTx(ctx, func(tx *wtx) error {
		var err error
		ss, err = scanSession(tx.QueryRowContext(ctx, "SELECT "+sessionColumns+" FROM sessions WHERE id = ? AND revoked_at IS NULL", id))
		if err != nil {
			return notFound(err)
		}
		ss.RevokedAt, ss.RevokedBy = now(), by
		_, err = tx.ExecContext(ctx, "UPDATE sessions SET revoked_at = ?, revoked_by = ? WHERE id = ?", dbTime(ss.RevokedAt), by, ss.ID)
		return err
	})
	if err != nil {
		return store.Session{}, fmt.Errorf("revoke session %d: %w", id, err)
	}
	return ss, nil
}

// RevokeSessionsOf implements store.Store.
func (s *Store) RevokeSessionsOf(ctx context.Context, identity, by string) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *wtx) error {
		at := now()
		res, err := tx.ExecContext(ctx, "UPDATE sessions SET revoked_at = ?, revoked_by = ? WHERE identity = ? AND revoked_at IS NULL AND expires_at > ?",
			dbTime(at), by, identity, dbTime(at))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("revoke the sessions of %s: %w", identity, err)
	}
	return int(n), nil
}

// TouchSession implements store.Store. Times are compared as stored text,
// which sorts as they do.
func (s *Store) TouchSession(ctx context.Context, id int64, at time.Time) error {
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, "UPDATE sessions SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
			dbTime(at), id, dbTime(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("touch session %d: %w", id, err)
	}
	return nil
}

// DeleteEndedSessions implements store.Store. Times are compared as stored
// text; a session not revoked (revoked_at NULL) is removed only once
// expired.
func (s *Store) DeleteEndedSessions(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM sessions WHERE expires_at < ?1 OR revoked_at < ?1", dbTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete the sessions ended before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return int(n), nil
}
