package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// putObservations replaces the stored observations of b's instances; a zero
// Since is set to t.
func putObservations(ctx context.Context, tx *wtx, obs []store.Observation, t time.Time) error {
	for _, o := range obs {
		if o.Application == "" || o.Service == "" || o.ReleaseChannel == "" {
			return fmt.Errorf("observation %s/%s/%s: application, service and release channel are required",
				o.Application, o.Service, o.ReleaseChannel)
		}
		body, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode observation of %s/%s/%s: %w", o.Application, o.Service, o.ReleaseChannel, err)
		}
		since := o.Since
		if since.IsZero() {
			since = t
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO observations (application, service, release_channel, body, since)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (application, service, release_channel) DO UPDATE SET body = excluded.body, since = excluded.since`,
			o.Application, o.Service, o.ReleaseChannel, body, dbTime(since)); err != nil {
			return fmt.Errorf("put observation of %s/%s/%s: %w", o.Application, o.Service, o.ReleaseChannel, err)
		}
	}
	return nil
}

func scanObservation(row interface{ Scan(...any) error }) (store.Observation, error) {
	var (
		o    store.Observation
		body []byte
	)
	if err := row.Scan(&o.Application, &o.Service, &o.ReleaseChannel, &body, scanTime{&o.Since}); err != nil {
		return o, err
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return o, fmt.Errorf("observation of %s/%s/%s: %w", o.Application, o.Service, o.ReleaseChannel, err)
	}
	return o, nil
}

// ListObservationsIn implements store.Store.
func (s *Store) ListObservationsIn(ctx context.Context, span store.ServiceSpan) ([]store.Observation, error) {
	out, err := queryAll(ctx, s.reads, "SELECT application, service, release_channel, body, since FROM observations"+inSpan,
		spanArgs(span), scanObservation)
	if err != nil {
		return nil, fmt.Errorf("list observations of %s/%s to %s/%s: %w", span.First.Application, span.First.Service,
			span.Last.Application, span.Last.Service, err)
	}
	return out, nil
}

// ListObservations implements store.Store.
func (s *Store) ListObservations(ctx context.Context, application, service string) ([]store.Observation, error) {
	q, args := byService("SELECT application, service, release_channel, body, since FROM observations", application, service)
	out, err := queryAll(ctx, s.reads, q, args, scanObservation)
	if err != nil {
		return nil, fmt.Errorf("list observations of %s/%s: %w", application, service, err)
	}
	return out, nil
}
