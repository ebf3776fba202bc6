package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// observationRow is an observation encoded for putObservations.
type observationRow struct {
	application, service, releaseChannel string
	body                                 []byte
	since                                any
}

// encodeObservations encodes obs for putObservations (a zero Since as t),
// before the write transaction.
func encodeObservations(obs []store.Observation, t time.Time) ([]observationRow, error) {
	if len(obs) == 0 {
		return nil, nil
	}
	rows := make([]observationRow, len(obs))
	for i, o := range obs {
		if o.Application == "" || o.Service == "" || o.ReleaseChannel == "" {
			return nil, fmt.Errorf("observation %s/%s/%s: application, service and release channel are required",
				o.Application, o.Service, o.ReleaseChannel)
		}
		body, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encode observation of %s/%s/%s: %w", o.Application, o.Service, o.ReleaseChannel, err)
		}
		since := o.Since
		if since.IsZero() {
			since = t
		}
		rows[i] = observationRow{application: o.Application, service: o.Service, releaseChannel: o.ReleaseChannel, body: body, since: dbTime(since)}
	}
	return rows, nil
}

// putObservations stores the observations of rows, each replacing the one
// of its instance.
func putObservations(ctx context.Context, tx *wtx, rows []observationRow) error {
	for _, o := range rows {
		if _, err := tx.ExecContext(ctx, `INSERT INTO observations (application, service, release_channel, body, since)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (application, service, release_channel) DO UPDATE SET body = excluded.body, since = excluded.since`,
			o.application, o.service, o.releaseChannel, o.body, o.since); err != nil {
			return fmt.Errorf("put observation of %s/%s/%s: %w", o.application, o.service, o.releaseChannel, err)
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
		return nil, fmt.Errorf("list observations of %s: %w", span, err)
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
