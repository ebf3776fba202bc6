package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/api/client"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testFlags are a server's flags with their defaults, on a new data
// directory and a free loopback port.
func testFlags(t *testing.T, database string) *serverFlags {
	keyFile := ""
	if database != "" {
		keyFile = filepath.Join(t.TempDir(), "secrets.key")
		if err := os.WriteFile(keyFile, []byte(sealing.NewKey()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &serverFlags{
		secretsKeyFile: keyFile,
		data:           filepath.Join(t.TempDir(), "data"), listen: "127.0.0.1:0", logLevel: "info",
		database: database, settings: engine.DefaultSettings(), workers: 4,
		keepDesiredStates: store.DefaultKeepSuperseded, shutdownGrace: 5 * time.Second, leaseTTL: 15 * time.Second,
	}
}

// TestServerStores: a server keeps its state in the data directory's SQLite
// database by default and in PostgreSQL with --database, and its health
// says which, with its replica name (to a caller with its token).
func TestServerStores(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ kind, database string }{{"sqlite", ""}, {"postgres", pgtest.NewDatabase(t)}} {
		t.Run(c.kind, func(t *testing.T) {
			f := testFlags(t, c.database)
			addr, stop, err := f.start(t.Context(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := stop(); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()
			h, err := client.New(addr, client.WithToken(f.token)).Health(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != "ok" || h.StoreKind != c.kind || !strings.Contains(h.Replica, "/") {
				t.Errorf("health %+v, want ok on %s with a replica name", h, c.kind)
			}
			// On a shared store, the records of this host's processes stay
			// in the data directory.
			if _, err := os.Stat(filepath.Join(f.data, "local.db")); (err == nil) != (c.kind == "postgres") {
				t.Errorf("%s: local.db in the data directory: %v", c.kind, err)
			}
		})
	}
}

// TestServerBadDatabase: a database that cannot be reached fails the
// start with an error that does not show the URL's password.
func TestServerBadDatabase(t *testing.T) {
	t.Parallel()
	f := testFlags(t, "postgres://drover:s3cret@127.0.0.1:1/nothing?sslmode=disable&connect_timeout=2")
	_, _, err := f.start(t.Context(), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("start on an unreachable database: %v", err)
	}
}

// TestEventRetentionFlags: a horizon under an hour is refused (a typo
// such as 90m for 90 days would delete nearly the whole history), and the
// archive is in the data directory unless --event-archive says otherwise.
func TestEventRetentionFlags(t *testing.T) {
	t.Parallel()
	f := testFlags(t, "")
	f.eventRetention = 90 * time.Minute
	if err := f.validate(); err != nil {
		t.Errorf("90m: %v", err)
	}
	f.eventRetention = 59 * time.Minute
	if err := f.validate(); err == nil || !strings.Contains(err.Error(), "--event-retention 59m0s: must be at least 1h") {
		t.Errorf("59m: %v", err)
	}
	if got, want := f.archiveDir(), filepath.Join(f.data, "events-archive"); got != want {
		t.Errorf("archive %s, want %s", got, want)
	}
	f.eventArchive = "/srv/archive"
	if got := f.archiveDir(); got != "/srv/archive" {
		t.Errorf("archive %s", got)
	}
}
