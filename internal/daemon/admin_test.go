package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump/dumptest"
	"github.com/drover-dev/drover/internal/store/postgres"
	"github.com/drover-dev/drover/internal/store/sqlite"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// filledDataDir returns a data directory whose database dumptest.Fill
// filled, and what the store shows.
func filledDataDir(t *testing.T) (string, dumptest.State) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	lock, st, err := openDataDir(t.Context(), dir, slog.New(slog.DiscardHandler), sqlite.KeepSuperseded(dumptest.Keep))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = st.Close()
		_ = lock.Release()
	}()
	dumptest.Fill(t, st)
	return dir, dumptest.Snapshot(t, st)
}

// snapshotDataDir reads what the store of a data directory shows.
func snapshotDataDir(t *testing.T, dir string) dumptest.State {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	return dumptest.Snapshot(t, st)
}

// snapshotDatabase reads what the store of a PostgreSQL database shows.
func snapshotDatabase(t *testing.T, url string) dumptest.State {
	t.Helper()
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	return dumptest.Snapshot(t, st)
}

// TestAdminMovesADataDirToPostgresAndBack: drover admin export of a data
// directory and drover admin import into PostgreSQL move the whole state;
// exported from PostgreSQL (named by DROVER_DATABASE) and imported into a
// new data directory, it is still the same. Both print what they moved.
func TestAdminMovesADataDirToPostgresAndBack(t *testing.T) {
	dir, want := filledDataDir(t)
	url := pgtest.NewDatabase(t)
	file := filepath.Join(t.TempDir(), "drover.dump")

	code, stdout, stderr := runMain("admin", "export", "--data", dir, "-o", file)
	if code != 0 || stdout != "" {
		t.Fatalf("export: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if !strings.HasPrefix(stderr, "exported 6 configs, 8 desired states, 3 approvals, 3 instances, 2 observations, 18 events, 3 task runs, 5 tasks, 3 leases, 2 runtime facts, 2 linked runtimes, 3 API tokens, 3 audit records, 4 secret versions, 2 notification targets, 8 deliveries from the data directory "+dir+" to "+file+"\n") ||
		!strings.Contains(stderr, "not exported: 1 process records") {
		t.Errorf("export printed:\n%s", stderr)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the dump file: %v, %v; want mode 0600", fi, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".drover.dump.tmp-*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	code, _, stderr = runMain("admin", "import", "--database", url, "-f", file)
	if code != 0 || !strings.HasPrefix(stderr, "imported 6 configs, 8 desired states") || !strings.Contains(stderr, "into the PostgreSQL database") {
		t.Fatalf("import: exit %d, stderr:\n%s", code, stderr)
	}
	dumptest.Compare(t, want, snapshotDatabase(t, url))

	// Back, with the database from the environment.
	t.Setenv("DROVER_DATABASE", url)
	file2 := filepath.Join(t.TempDir(), "again.dump")
	if code, _, stderr := runMain("admin", "export", "-o", file2); code != 0 {
		t.Fatalf("export from DROVER_DATABASE: exit %d, stderr:\n%s", code, stderr)
	}
	dir2 := filepath.Join(t.TempDir(), "new-data")
	code, _, stderr = runMain("admin", "import", "--data", dir2, "-f", file2)
	if code != 0 || !strings.Contains(stderr, "into the data directory "+dir2) {
		t.Fatalf("import into a new data directory: exit %d, stderr:\n%s", code, stderr)
	}
	dumptest.Compare(t, want, snapshotDataDir(t, dir2))

	// The store is not empty any more: a second import is refused.
	code, _, stderr = runMain("admin", "import", "--data", dir2, "-f", file2)
	if code != 1 || !strings.Contains(stderr, "the target store is not empty: it holds 6 configs") {
		t.Errorf("second import: exit %d, stderr:\n%s", code, stderr)
	}
	dumptest.Compare(t, want, snapshotDataDir(t, dir2))
}

// TestAdminThroughStandardStreams: export writes the dump to standard output
// and import reads it from standard input.
func TestAdminThroughStandardStreams(t *testing.T) {
	t.Parallel()
	dir, want := filledDataDir(t)
	code, dumpText, stderr := runMain("admin", "export", "--data", dir)
	if code != 0 || !strings.HasPrefix(dumpText, `{"format":"drover-dump","version":1,`) || !strings.Contains(stderr, "to standard output") {
		t.Fatalf("export: exit %d, stderr:\n%s", code, stderr)
	}
	var out, errb bytes.Buffer
	root := cli.NewRoot(&out, &errb, Commands()...)
	root.SetIn(strings.NewReader(dumpText))
	dir2 := filepath.Join(t.TempDir(), "data")
	root.SetArgs([]string{"admin", "import", "--data", dir2})
	if err := root.Execute(); err != nil || !strings.Contains(errb.String(), "from standard input") {
		t.Fatalf("import from standard input: %v, stderr:\n%s", err, errb.String())
	}
	dumptest.Compare(t, want, snapshotDataDir(t, dir2))
}

// TestAdminExportRefusesARunningServer: export from (or import into) the
// data directory of a running server fails (exit 1), saying to stop the
// server first, and writes no file.
func TestAdminExportRefusesARunningServer(t *testing.T) {
	t.Parallel()
	f := testFlags(t, "")
	addr, stop, err := f.start(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	file := filepath.Join(t.TempDir(), "drover.dump")
	empty := filepath.Join(t.TempDir(), "empty.dump")
	if err := os.WriteFile(empty, []byte(`{"format":"drover-dump","version":1}`+"\n"+`{"kind":"end","record":{"records":0}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"export", "-o", file}, {"import", "-f", empty}} {
		verb := args[0]
		code, _, stderr := runMain(append([]string{"admin", verb, "--data", f.data}, args[1:]...)...)
		if code != 1 || !strings.Contains(stderr, "cannot "+verb+": the data directory "+f.data+" is in use by a drover server (PID ") ||
			!strings.Contains(stderr, strings.TrimPrefix(addr, "http://")) || !strings.Contains(stderr, "stop the server first") {
			t.Errorf("%s while a server runs: exit %d, stderr:\n%s", verb, code, stderr)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a dump file was written (stat: %v)", err)
	}
}

// TestAdminErrors: what an admin command refuses, with its exit code.
func TestAdminErrors(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	newer := filepath.Join(t.TempDir(), "newer.dump")
	if err := os.WriteFile(newer, []byte(`{"format":"drover-dump","version":2}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.dump")
	if err := os.WriteFile(truncated, []byte(`{"format":"drover-dump","version":1}`+"\n"+`{"kind":"config","record":{"kind":"runtime","name":"k","version":1,"hash":"h","createdAt":"2026-01-02T03:04:05Z"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"admin", "export", "--data", "x", "--database", "postgres://h/db"}, exitUsage, "give --data or --database, not both"},
		{[]string{"admin", "import", "--data", ""}, exitUsage, "--data needs a directory"},
		{[]string{"admin", "export", "--database", ""}, exitUsage, "--database needs a PostgreSQL URL"},
		{[]string{"admin", "export", "--data", empty, "-o", ""}, exitUsage, "-o needs a file name"},
		{[]string{"admin", "export", "--data", empty, "extra"}, exitUsage, "unknown command"},
		{[]string{"admin", "frobnicate"}, exitUsage, `unknown command "frobnicate" for "drover admin"`},
		{[]string{"admin", "export", "--data", filepath.Join(empty, "missing")}, 1, "there is no data directory"},
		{[]string{"admin", "export", "--data", empty}, 1, "there is no database (drover.db) in " + empty},
		{[]string{"admin", "import", "--data", filepath.Join(t.TempDir(), "d"), "-f", newer}, 1, "format version 2, newer than this drover reads"},
		{[]string{"admin", "import", "--data", filepath.Join(t.TempDir(), "d"), "-f", truncated}, 1, "line 2: the dump ends without its end line"},
		{[]string{"admin", "import", "--data", filepath.Join(t.TempDir(), "d"), "-f", filepath.Join(empty, "nothing.dump")}, 1, "no such file"},
	}
	if os.Getenv("DROVER_DATABASE") == "" {
		cases = append(cases, struct {
			args []string
			code int
			msg  string
		}{[]string{"admin", "import"}, exitUsage, "say which store: --data DIR"})
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runMain(c.args...)
			if code != c.code || !strings.Contains(stderr, c.msg) {
				t.Errorf("exit %d, want %d with %q; stderr:\n%s", code, c.code, c.msg, stderr)
			}
		})
	}
	if code, stdout, _ := runMain("admin"); code != 0 || !strings.Contains(stdout, "drover admin export --data") {
		t.Errorf("drover admin: exit %d, stdout:\n%s", code, stdout)
	}
}

// TestAdminRotateSecretsKey: a data directory's values sealed with its own
// keyring are resealed with a new first key by drover admin reseal, after
// which the new key alone reads them.
func TestAdminRotateSecretsKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	code, newKey, stderr := runMain("admin", "new-key")
	if code != 0 {
		t.Fatalf("new-key: %d %s", code, stderr)
	}
	newKey = strings.TrimSpace(newKey)
	f := &serverFlags{data: dir}
	oldRing, err := f.keyring(slog.New(slog.DiscardHandler)) // makes DATA/secrets.key
	if err != nil {
		t.Fatal(err)
	}
	lock, st, err := openDataDir(t.Context(), dir, slog.New(slog.DiscardHandler), sqlite.WithSealer(oldRing))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PutConfig(t.Context(), store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"s":"x"}`), Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	_, _ = st.Close(), lock.Release()
	oldText, err := os.ReadFile(filepath.Join(dir, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	rotated := filepath.Join(t.TempDir(), "rotated.key")
	if err := os.WriteFile(rotated, []byte(newKey+"\n"+string(oldText)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMain("admin", "reseal", "--data", dir, "--secrets-key-file", rotated)
	if code != 0 || !strings.Contains(stderr, "resealed 1 values") {
		t.Fatalf("reseal: exit %d, %s", code, stderr)
	}
	onlyNew, err := sealing.ParseKeyring(newKey)
	if err != nil {
		t.Fatal(err)
	}
	lock, st, err = openDataDir(t.Context(), dir, slog.New(slog.DiscardHandler), sqlite.WithSealer(onlyNew))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = st.Close(), lock.Release() }()
	if c, err := st.GetConfig(t.Context(), "service", "shop/web"); err != nil || string(c.Body) != `{"s":"x"}` {
		t.Errorf("the config with the new key alone: %q %v", c.Body, err)
	}
}
