package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/datadir"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
	"github.com/drover-dev/drover/internal/store/postgres"
)

// newAdminCmd is drover admin: operations on a server's store, run with
// the server stopped.
func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operate on a server's store: export and import its whole state; rotate the key that seals secrets",
		Long: `Admin operates on a server's store directly, not through the API: export
writes the whole state of a store (configs, desired states, approvals,
instances, observations, the event history, task runs, tasks, leases, runtime
facts) as a dump, and import loads a dump into an empty store. Together they
move an installation from the embedded SQLite database of a data directory to
PostgreSQL (or back) without losing history: event numbers, run and task ids
and lease tokens are kept.

Stop the server first: export from a data directory takes its lock and
refuses while a server runs on it.`,
		Example: `  drover admin export --data /var/lib/drover -o drover.dump
  drover admin import --database postgres://drover@db.internal/drover -f drover.dump
  drover admin export --data /var/lib/drover | drover admin import --database postgres://drover@db.internal/drover`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cli.UsageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newAdminExportCmd(), newAdminImportCmd(), newAdminNewKeyCmd(), newAdminResealCmd())
	return cmd
}

// adminStore are the flags that name the store of an admin command.
type adminStore struct {
	data, database string
}

func (f *adminStore) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "", "a server's data directory: its embedded SQLite database (drover server's default is "+defaultDataDir("server")+")")
	fl.StringVar(&f.database, "database", os.Getenv("DROVER_DATABASE"), "a PostgreSQL URL (postgres://user@host/db), as drover server --database takes it (env DROVER_DATABASE)")
}

// check refuses flags that do not name exactly one store: --data, or
// --database (or DROVER_DATABASE). An explicit --data wins over the
// environment.
func (f *adminStore) check(cmd *cobra.Command) error {
	dataSet, dbSet := cmd.Flags().Changed("data"), cmd.Flags().Changed("database")
	switch {
	case dataSet && dbSet:
		return cli.UsageErrorf("give --data or --database, not both")
	case dataSet:
		if f.data == "" {
			return cli.UsageErrorf("--data needs a directory")
		}
		f.database = ""
	case dbSet && f.database == "":
		return cli.UsageErrorf("--database needs a PostgreSQL URL")
	case f.database == "":
		return cli.UsageErrorf("say which store: --data DIR (a data directory's embedded database) or --database URL (PostgreSQL; env DROVER_DATABASE)")
	}
	return nil
}

// describe names the store for messages.
func (f *adminStore) describe() string {
	if f.database != "" {
		return "the PostgreSQL database " + redactURL(f.database)
	}
	return "the data directory " + f.data
}

// adminLog is the logger of what opening a store warns about.
func adminLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// dumpStore is a store the admin commands export or import.
type dumpStore interface {
	store.Store
	dump.Exporter
	dump.Importer
}

// openAdminStore opens the store f names for verb ("export", "import"):
// the PostgreSQL database, or the data directory's SQLite database under the
// directory's lock, which export requires to exist and import creates.
// release closes the store (and unlocks the directory).
func openAdminStore(ctx context.Context, f *adminStore, verb string, stderr io.Writer) (st dumpStore, kind string, release func(), err error) {
	if f.database != "" {
		pg, err := postgres.Open(ctx, f.database)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s: open the PostgreSQL store: %w", verb, err)
		}
		return pg, "postgres", func() { _ = pg.Close() }, nil
	}
	if verb == "export" {
		if fi, err := os.Stat(f.data); err != nil || !fi.IsDir() {
			return nil, "", nil, fmt.Errorf("export: there is no data directory %s", f.data)
		}
		if _, err := os.Stat(filepath.Join(f.data, "drover.db")); err != nil {
			return nil, "", nil, fmt.Errorf("export: there is no database (drover.db) in %s: is it a server's --data?", f.data)
		}
	}
	lock, sq, err := openDataDir(ctx, f.data, adminLog(stderr))
	if err != nil {
		var inUse *datadir.InUseError
		if errors.As(err, &inUse) {
			return nil, "", nil, serverRunning(verb, inUse)
		}
		return nil, "", nil, fmt.Errorf("%s: %w", verb, err)
	}
	return sq, "sqlite", func() {
		_ = sq.Close()
		_ = lock.Release()
	}, nil
}

// inUseError is the error of an admin command on a data directory a server
// holds; it wraps datadir.ErrInUse.
type inUseError struct{ msg string }

func (e *inUseError) Error() string { return e.msg }
func (e *inUseError) Unwrap() error { return datadir.ErrInUse }

// serverRunning explains that verb needs the server of the data directory
// stopped.
func serverRunning(verb string, e *datadir.InUseError) error {
	who := "a drover server"
	if e.Holder.PID > 0 {
		who += fmt.Sprintf(" (PID %d", e.Holder.PID)
		if e.Holder.Listen != "" {
			who += ", listening on " + e.Holder.Listen
		}
		who += ")"
	}
	return &inUseError{msg: fmt.Sprintf("cannot %s: the data directory %s is in use by %s: stop the server first (%s never touches a database a server is using)",
		verb, e.Dir, who, verb)}
}

func newAdminExportCmd() *cobra.Command {
	var (
		f      adminStore
		output string
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the whole state of a store as a dump",
		Long: `Export writes the whole state of a store as a dump: a versioned stream of JSON
lines (see docs/data-directory.md), read in one consistent snapshot. It reads
the embedded SQLite database of a data directory (--data) or a PostgreSQL
database (--database, or DROVER_DATABASE). The dump goes to standard output,
or with -o to a file (mode 0600), which appears only once the dump is whole.

Stop the server first. Export from a data directory takes the directory's
lock, as the server does, and refuses while a server runs on it. PostgreSQL
is read in one snapshot even while servers write; stop them before a move,
or what they write after the snapshot is not in the dump.

The dump holds everything the store holds, secrets in compiled desired
states and the secret store's versions (sealed, as stored) included: keep it
as private as the database. Process records (the commands a server had
running on its host) are not exported: they mean nothing on another host.

At the end it prints what it exported on standard error.`,
		Example: `  drover admin export --data /var/lib/drover -o drover.dump
  drover admin export --database postgres://drover@db.internal/drover > drover.dump
  DROVER_DATABASE=postgres://drover@db.internal/drover drover admin export -o drover.dump`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			if output == "" {
				return cli.UsageErrorf("-o needs a file name (or - for standard output)")
			}
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			return adminExport(ctx, &f, output, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "-", "write the dump to this file (- = standard output)")
	return cmd
}

// adminExport exports the store f names to output ("-" = stdout).
func adminExport(ctx context.Context, f *adminStore, output string, stdout, stderr io.Writer) (err error) {
	src, kind, release, err := openAdminStore(ctx, f, "export", stderr)
	if err != nil {
		return err
	}
	defer release()
	procs, err := src.ListProcesses(ctx)
	if err != nil {
		return fmt.Errorf("export %s: %w", f.describe(), err)
	}
	to := "standard output"
	w := stdout
	var file *outputFile
	if output != "-" {
		to = output
		if file, err = createOutput(output); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer file.discard()
		w = file
	}
	counts, err := dump.Write(ctx, w, src, dump.Header{Store: kind})
	if err != nil {
		return fmt.Errorf("%s: %w", f.describe(), err)
	}
	if file != nil {
		if err := file.commit(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	fmt.Fprintf(stderr, "exported %s from %s to %s\n", counts, f.describe(), to)
	if len(procs) > 0 {
		fmt.Fprintf(stderr, "not exported: %d process records (commands a server left running on this host, which a server started on this store ends)\n", len(procs))
	}
	return nil
}

// outputFile is a dump being written: a temporary file beside its name,
// renamed to it once whole, so that a failed export leaves no file that
// looks like a dump.
type outputFile struct {
	*os.File
	path string
	done bool
}

// createOutput starts writing the file path (mode 0600).
func createOutput(path string) (*outputFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &outputFile{File: f, path: path}, nil
}

// commit syncs the file and gives it its name.
func (o *outputFile) commit() error {
	if err := errors.Join(o.Sync(), o.Close()); err != nil {
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	if err := os.Rename(o.Name(), o.path); err != nil {
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	o.done = true
	return nil
}

// discard removes the file unless it was committed.
func (o *outputFile) discard() {
	if o.done {
		return
	}
	_ = o.Close()
	_ = os.Remove(o.Name())
}

func newAdminImportCmd() *cobra.Command {
	var (
		f     adminStore
		input string
	)
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Load a dump into an empty store",
		Long: `Import loads a dump that drover admin export wrote into an empty store: the
embedded SQLite database of a data directory (--data, created when missing)
or a PostgreSQL database (--database, or DROVER_DATABASE; its schema is
created when missing). It reads the dump from standard input, or with -f from
a file.

Everything keeps its identity: event numbers (a client that follows events
after number N goes on where it was), run and task ids (drover run ID),
revisions, lease tokens (fencing stays monotonic) and times to the
nanosecond; later events, runs and tasks are numbered after the imported
ones.

The store must be empty: import refuses one that holds anything, and writes
nothing. The dump is loaded in one transaction: a dump that is truncated,
damaged (the error names the line) or of a newer format writes nothing.
Import into a data directory takes its lock, so stop any server on it first.

At the end it prints what it imported on standard error.`,
		Example: `  drover admin import --database postgres://drover@db.internal/drover -f drover.dump
  drover admin import --data /var/lib/drover-new < drover.dump
  drover admin export --data /var/lib/drover | drover admin import --database postgres://drover@db.internal/drover`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			if input == "" {
				return cli.UsageErrorf("-f needs a file name (or - for standard input)")
			}
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			return adminImport(ctx, &f, input, cmd.InOrStdin(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&input, "file", "f", "-", "read the dump from this file (- = standard input)")
	return cmd
}

// adminImport imports the dump of input ("-" = stdin) into the store f names.
func adminImport(ctx context.Context, f *adminStore, input string, stdin io.Reader, stderr io.Writer) error {
	from := "standard input"
	r := stdin
	if input != "-" {
		from = input
		file, err := os.Open(input)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer func() { _ = file.Close() }()
		r = file
	}
	dst, _, release, err := openAdminStore(ctx, f, "import", stderr)
	if err != nil {
		return err
	}
	defer release()
	_, counts, err := dump.Read(ctx, r, dst)
	if err != nil {
		return fmt.Errorf("import from %s into %s: %w", from, f.describe(), err)
	}
	skipped := counts[dump.KindProcess]
	delete(counts, dump.KindProcess)
	fmt.Fprintf(stderr, "imported %s from %s into %s\n", counts, from, f.describe())
	if skipped > 0 {
		fmt.Fprintf(stderr, "skipped: %d process records of the exporting host\n", skipped)
	}
	return nil
}
