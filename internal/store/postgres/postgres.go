package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/internal/store"
)

// Store is the PostgreSQL implementation of store.Store. It is safe for
// concurrent use, also by several processes sharing one database.
type Store struct {
	pool *pgxpool.Pool
	// keepSuperseded is the retention bound of CreateDesiredState (see
	// retention.go); negative keeps everything.
	keepSuperseded int
	// health is the outcome of the last write, for Check (see health.go).
	health health
	// log hears what goes wrong in the background (the change feed).
	log *slog.Logger
	// sealer encrypts config bodies and desired states' parameters and
	// compiled forms at rest (nil: they are kept as they are).
	sealer store.Sealer
}

var (
	_ store.Store = (*Store)(nil)
	_ store.Feed  = (*Store)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	keepSuperseded int
	log            *slog.Logger
	sealer         store.Sealer
}

// WithSealer encrypts config bodies and desired states' parameters and
// compiled forms at rest with sealer (see seal.go).
func WithSealer(sealer store.Sealer) Option { return func(o *options) { o.sealer = sealer } }

// Logger sets the logger of what goes wrong in the background, such as the
// change feed's connection lost (default: discard).
func Logger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// KeepSuperseded sets how many superseded desired states per service keep
// their compiled copy beyond those instances reference
// (store.DefaultKeepSuperseded by default); a negative n keeps them all.
func KeepSuperseded(n int) Option { return func(o *options) { o.keepSuperseded = n } }

// applicationName is the application_name of the store's sessions unless the
// URL sets one.
const applicationName = "drover"

// Open connects to the PostgreSQL database at url (a postgres:// URL or a
// key=value connection string, as pgx parses them) and applies any pending
// schema migrations; several processes may open one database at once (see
// migrate.go). It fails if the database's schema is newer than this binary
// knows. Unless the URL sets pool_max_conns, the pool holds up to
// max(8, 4*GOMAXPROCS) connections.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{keepSuperseded: store.DefaultKeepSuperseded, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if strings.TrimSpace(url) == "" {
		// pgx would fall back to PG* environment variables and localhost.
		return nil, errors.New("open store: the database URL is empty")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx redacts the password in the URL it quotes.
		return nil, fmt.Errorf("open store: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0))) //nolint:gosec // a small positive number
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = applicationName
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", where, err)
	}
	if err := migrate(ctx, pool, migrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store %s: %w", where, err)
	}
	return &Store{pool: pool, keepSuperseded: o.keepSuperseded, sealer: o.sealer, log: o.log}, nil
}

// Close closes the connection pool, waiting for connections in use to be
// returned. Outstanding calls may fail.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// now is the store's clock for the times it assigns (creation, update and
// event times), in UTC without a monotonic reading. Lease and claim expiry
// use the database's clock instead (see work.go).
func now() time.Time { return time.Now().UTC().Round(0) }
