package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/internal/store"
)

// Sessions (table sessions, migration 0006): the people signed in through
// the OpenID provider. Each method is one statement: the unique hash decides
// concurrent creates (store.ErrConflict), and a revoke is an UPDATE of the
// row not revoked yet, so of concurrent revokes of one session one wins and
// the others find none (store.ErrNotFound). Every write is durable, as the
// store's writes are (the SQLite store commits a session's last use and the
// deletion of ended sessions crash safe only).
//
// A session's hash is a credential's: no error message repeats it (the
// detail of a unique violation quotes it, and CreateSession does not wrap
// that error). The identity and subject are names, not cleaned (invalid text
// fails the write); the other text is cleaned as free text (see text).

// sessionColumns are the columns of sessions, in the order scanSession
// reads them.
const sessionColumns = "id, hash, identity, subject, roles, groups, via, source, created_at, expires_at, revoked_at, revoked_by, last_used_at"

// scanSession scans a row of sessionColumns.
func scanSession(row scanner) (store.Session, error) {
	var s store.Session
	err := row.Scan(&s.ID, &s.Hash, &s.Identity, &s.Subject, &s.Roles, &s.Groups, &s.Via, &s.Source, at(&s.CreatedAt),
		at(&s.ExpiresAt), at(&s.RevokedAt), &s.RevokedBy, at(&s.LastUsedAt))
	return s, err
}

// insertSession creates a session: the columns of sessionColumns but id,
// which the identity draws, and the revocation and last use, which are unset.
const insertSession = "INSERT INTO sessions (hash, identity, subject, roles, groups, via, source, created_at, expires_at)" +
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id"

// sessionConflict is conflict for a session's hash, the only unique key
// besides its id. It does not wrap PostgreSQL's error, whose detail quotes
// the hash.
func sessionConflict(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != codeUniqueViolation {
		return err
	}
	return fmt.Errorf("a session has the same hash: %w", store.ErrConflict)
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
	err := s.pool.QueryRow(ctx, insertSession, ss.Hash, ss.Identity, ss.Subject, texts(ss.Roles), texts(ss.Groups),
		text(ss.Via), text(ss.Source), nanos(ss.CreatedAt), nanos(ss.ExpiresAt)).Scan(&ss.ID)
	if err := s.health.wrote(err); err != nil {
		return store.Session{}, fmt.Errorf("create session of %s: %w", ss.Identity, sessionConflict(err))
	}
	ss.CreatedAt, ss.ExpiresAt = ss.CreatedAt.UTC(), ss.ExpiresAt.UTC()
	return ss, nil
}

// SessionByHash implements store.Store.
func (s *Store) SessionByHash(ctx context.Context, hash string) (store.Session, error) {
	ss, err := scanSession(s.pool.QueryRow(ctx, "SELECT "+sessionColumns+" FROM sessions WHERE hash = $1", hash))
	if err != nil {
		return store.Session{}, fmt.Errorf("session by hash: %w", notFound(err))
	}
	return ss, nil
}

// ListSessions implements store.Store: every session, by id.
func (s *Store) ListSessions(ctx context.Context) ([]store.Session, error) {
	out, err := queryAll(ctx, s.pool, "SELECT "+sessionColumns+" FROM sessions ORDER BY id", nil, scanSession)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// RevokeSession implements store.Store with one UPDATE of the session not
// revoked yet. A concurrent revoke of the same session waits for this one
// and then finds it revoked: it fails with store.ErrNotFound.
func (s *Store) RevokeSession(ctx context.Context, id int64, by string) (store.Session, error) {
	ss, err := scanSession(s.pool.QueryRow(ctx, "UPDATE sessions SET revoked_at = $2, revoked_by = $3"+
		" WHERE id = $1 AND revoked_at IS NULL RETURNING "+sessionColumns, id, nanos(now()), text(by)))
	err = s.health.wrote(err)
	if err != nil {
		return store.Session{}, fmt.Errorf("revoke session %d: %w", id, notFound(err))
	}
	return ss, nil
}

// RevokeSessionsOf implements store.Store with one UPDATE of the sessions
// of identity not revoked yet and not expired.
func (s *Store) RevokeSessionsOf(ctx context.Context, identity, by string) (int, error) {
	tag, err := s.pool.Exec(ctx, "UPDATE sessions SET revoked_at = $2, revoked_by = $3 WHERE identity = $1 AND revoked_at IS NULL AND expires_at > $2",
		identity, nanos(now()), text(by))
	if err := s.health.wrote(err); err != nil {
		return 0, fmt.Errorf("revoke the sessions of %s: %w", identity, err)
	}
	return int(tag.RowsAffected()), nil
}

// TouchSession implements store.Store. An unknown id, or a time not after
// the one recorded, changes nothing.
func (s *Store) TouchSession(ctx context.Context, id int64, used time.Time) error {
	_, err := s.pool.Exec(ctx, "UPDATE sessions SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)",
		id, nanos(used))
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("touch session %d: %w", id, err)
	}
	return nil
}

// DeleteEndedSessions implements store.Store with one DELETE. A session not
// revoked (revoked_at NULL) is removed only once expired.
func (s *Store) DeleteEndedSessions(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, "DELETE FROM sessions WHERE expires_at < $1 OR revoked_at < $1", nanos(before))
	if err := s.health.wrote(err); err != nil {
		return 0, fmt.Errorf("delete the sessions ended before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return int(tag.RowsAffected()), nil
}
