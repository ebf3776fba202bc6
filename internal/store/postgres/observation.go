package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

// putObservations replaces the stored observations of their instances in
// tx; a zero Since is set to t.
func putObservations(ctx context.Context, tx pgx.Tx, obs []store.Observation, t time.Time) error {
	for _, o := range obs {
		body, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode observation of %s/%s/%s: %w", o.Application, o.Service, o.ReleaseChannel, err)
		}
		since := o.Since
		if since.IsZero() {
			since = t
		}
		if _, err := tx.Exec(ctx, `INSERT INTO observations (application, service, release_channel, body, since)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (application, service, release_channel) DO UPDATE SET body = excluded.body, since = excluded.since`,
			o.Application, o.Service, o.ReleaseChannel, body, nanos(since)); err != nil {
			return fmt.Errorf("put observation of %s/%s/%s: %w", o.Application, o.Service, o.ReleaseChannel, err)
		}
	}
	return nil
}

func scanObservation(row scanner) (store.Observation, error) {
	var (
		o    store.Observation
		body []byte
	)
	if err := row.Scan(&o.Application, &o.Service, &o.ReleaseChannel, &body, at(&o.Since)); err != nil {
		return o, err
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return o, fmt.Errorf("observation of %s/%s/%s: %w", o.Application, o.Service, o.ReleaseChannel, err)
	}
	return o, nil
}

// ListObservationsIn implements store.Store.
func (s *Store) ListObservationsIn(ctx context.Context, span store.ServiceSpan) ([]store.Observation, error) {
	out, err := queryAll(ctx, s.pool, "SELECT application, service, release_channel, body, since FROM observations"+inSpan,
		spanArgs(span), scanObservation)
	if err != nil {
		return nil, fmt.Errorf("list observations of %s: %w", span, err)
	}
	return out, nil
}

// ListObservations implements store.Store.
func (s *Store) ListObservations(ctx context.Context, application, service string) ([]store.Observation, error) {
	q, args := byService("SELECT application, service, release_channel, body, since FROM observations", application, service)
	out, err := queryAll(ctx, s.pool, q, args, scanObservation)
	if err != nil {
		return nil, fmt.Errorf("list observations of %s/%s: %w", application, service, err)
	}
	return out, nil
}
