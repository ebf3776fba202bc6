package auth_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-dev/drover/internal/auth"
)

func TestS1TokenCreatedOnceWithMode0600(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok, err := auth.LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, auth.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("token file mode %04o, want 0600", perm)
	}
	again, err := auth.LoadOrCreateToken(dir)
	if err != nil || again != tok {
		t.Errorf("second start: token %q (%v), want the first one %q", again, err, tok)
	}
	other, err := auth.LoadOrCreateToken(t.TempDir())
	if err != nil || other == tok {
		t.Errorf("another data directory got token %q (%v)", other, err)
	}
	if err := os.Chmod(filepath.Join(dir, auth.TokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadOrCreateToken(dir); err == nil {
		t.Error("a token file others can read was used")
	}
}

// The CLI finds the token a server recorded for its address, under every
// name of a loopback server; XDG_CONFIG_HOME is honoured.
func TestS1TokenRecordedForTheCLI(t *testing.T) { // not parallel: t.Setenv
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	if _, _, err := auth.FindServerToken("http://127.0.0.1:7420"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("nothing recorded yet: got %v", err)
	}
	path, err := auth.RecordServerToken("127.0.0.1:7420", "drover_AAAAAAAAAAAAAAAAAAAA")
	if err != nil {
		t.Fatal(err)
	}
	if rel, _ := filepath.Rel(cfg, path); rel != filepath.Join("drover", "servers", "127.0.0.1_7420", "token") {
		t.Errorf("recorded at %s", path)
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %04o: others can read it", p, fi.Mode().Perm())
		}
	}
	for _, u := range []string{"http://127.0.0.1:7420", "http://localhost:7420/", "http://[::1]:7420"} {
		if tok, _, err := auth.FindServerToken(u); err != nil || tok != "drover_AAAAAAAAAAAAAAAAAAAA" {
			t.Errorf("FindServerToken(%s) = %q, %v", u, tok, err)
		}
	}
	if _, _, err := auth.FindServerToken("http://127.0.0.1:7421"); err == nil {
		t.Error("a token was found for another port")
	}
	// IPv6 and wildcard listens have keys of their own.
	if _, err := auth.RecordServerToken("[::]:7422", "drover_BBBBBBBBBBBBBBBBBBBB"); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := auth.FindServerToken("http://localhost:7422"); err != nil || tok != "drover_BBBBBBBBBBBBBBBBBBBB" {
		t.Errorf("wildcard listen: %q, %v", tok, err)
	}
}
