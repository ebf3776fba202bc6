package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store/sqlite"
)

// The data directory: one server at a time (B1), a directory removed under
// a running server (B4), an emptied database (B22), private files (S8).

// healthStatus returns the HTTP status and body of GET /v1/health.
// With the server's token the body says what is wrong with the store.
func healthStatus(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := newAPIRequest(http.MethodGet, url+"/v1/health", token, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestB1SecondServerOnDataDirRefused(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	want := fmt.Sprintf("data directory %s is in use by drover server PID %d (listening on %s)", s.data, pid, s.addr)
	for _, verb := range []string{"server", "dev"} {
		r, err := execDrover(30*time.Second, []string{verb, "--data", s.data, "--listen", freeAddr(t)})
		if err != nil {
			t.Fatalf("%s: %v\n%s", verb, err, r)
		}
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("a second drover %s on the same data directory: want a non-zero exit and %q, got %s", verb, want, r)
		}
	}
	// The first server is untouched and a restart (after kill -9) takes the lock again.
	if code, body := healthStatus(t, s.url, s.token()); code != http.StatusOK {
		t.Fatalf("health of the first server = %d %s", code, body)
	}
	s.restart()
	if code, body := healthStatus(t, s.url, s.token()); code != http.StatusOK {
		t.Fatalf("health after a restart = %d %s", code, body)
	}
}

func TestB4DataDirRemovedRefusesWrites(t *testing.T) {
	requireE2E(t)
	dir := copyQuickstart(t, "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", "quickstart", "web", "image=1.27")
	token := s.token() // the CLI keeps its copy in the config directory
	// The server may be creating a file in the directory (a WAL, a runtime's
	// work directory) while it is being removed; rm -rf again, as a user would.
	var err error
	for range 20 {
		if err = os.RemoveAll(s.data); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := s.as("alice", "push", "web", "--app", "quickstart", "--param", "image=1.28")
	if r.code == 0 || !strings.Contains(r.stderr, "removed or replaced") {
		t.Errorf("push after rm -rf of the data directory: want a failure naming the cause, got %s", r)
	}
	r = s.as("alice", "approve", "web", "--app", "quickstart", "--release-channel", "prod")
	if r.code == 0 {
		t.Errorf("approve after rm -rf of the data directory succeeded: %s", r)
	}
	code, body := healthStatus(t, s.url, token)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "removed or replaced") {
		t.Errorf("health after rm -rf of the data directory = %d %s, want 503 naming the cause", code, body)
	}
}

func TestB22EmptiedDatabaseRefusedAtStart(t *testing.T) {
	requireE2E(t)
	dir := copyQuickstart(t, "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	stopServer(s, cmd, exited) // a clean stop checkpoints the WAL into drover.db
	db := filepath.Join(s.data, "drover.db")
	if err := os.Truncate(db, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.startOnce()
	if err == nil {
		t.Fatal("the server started on an emptied drover.db")
	}
	if want := "database " + db + " is empty (0 bytes)"; !strings.Contains(err.Error(), want) {
		t.Errorf("start on an emptied database: want %q in\n%v", want, err)
	}
}

func TestS8DataDirAndDatabasePrivate(t *testing.T) {
	requireE2E(t)
	base := t.TempDir()
	s := &server{t: t, data: filepath.Join(base, "data"), addr: freeAddr(t), logPath: filepath.Join(base, "server.log")}
	if err := os.Mkdir(s.data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.data, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	t.Cleanup(s.cleanup)
	s.start()
	dir := copyQuickstart(t, "1s")
	s.ok("alice", "apply", dir+"/...")
	for path, want := range map[string]os.FileMode{
		s.data: 0o700, filepath.Join(s.data, "drover.db"): 0o600, filepath.Join(s.data, "drover.db-wal"): 0o600,
		filepath.Join(s.data, "drover.db-shm"): 0o600, filepath.Join(s.data, "drover.lock"): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
	}
}

// TestB10RollbackAfterRetentionPruned: with no superseded desired states
// kept beyond what instances need, older pushes lose their compiled copy,
// yet status and a rollback to the previous version still work.
func TestB10RollbackAfterRetentionPruned(t *testing.T) {
	requireE2E(t)
	dir := oneChannelTree(t, "keep", "200ms")
	s := newServer(t, "--keep-desired-states", "0", "--poll-interval", "100ms")
	s.ok("alice", "apply", dir+"/...")
	var versions, ids []string
	for _, image := range []string{"1.0", "2.0", "3.0"} {
		v, id := s.push("alice", "keep", "web", "image="+image)
		ids = append(ids, id)
		if r := s.as("alice", "wait", "web", "--app", "keep", "--timeout", "30s"); r.code != 0 {
			t.Fatalf("wait for image %s: %s", image, r)
		}
		versions = append(versions, v)
	}
	// A push identical to the active one is accepted (it retries a rollout).
	s.push("alice", "keep", "web", "image=3.0")
	if r := s.as("alice", "wait", "web", "--app", "keep", "--timeout", "30s"); r.code != 0 {
		t.Fatalf("wait after an identical push: %s", r)
	}
	s.ok("alice", "rollback", "web", "--app", "keep", "--release-channel", "staging")
	s.waitStatus("keep", "web", 30*time.Second, "staging rolled back to the previous version", channelIs("staging", "ROLLED_BACK", versions[1]))

	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	stopServer(s, cmd, exited)
	st, err := sqlite.Open(t.Context(), filepath.Join(s.data, "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	first, err := st.GetDesiredState(t.Context(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if first.PrunedAt.IsZero() || first.Compiled != nil {
		t.Errorf("the first push's desired state was not pruned: pruned at %v, %d compiled bytes", first.PrunedAt, len(first.Compiled))
	}
}
