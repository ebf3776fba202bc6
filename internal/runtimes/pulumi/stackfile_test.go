package pulumi

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// TestSourceStackFile: the program's own Pulumi.<stack>.yaml applies; a
// change of drover's config, and a restart, do not copy it over the
// copy's again (which would lose the secrets provider the stack was
// created with); a change of it is copied, keeping that provider, and the
// stack's secrets stay readable throughout.
func TestSourceStackFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	k := ikey("src", "staging")
	source := filepath.Join(f.program, "Pulumi.src-staging.yaml")
	if err := os.WriteFile(source, []byte("config:\n  drovertest:greeting: hola\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := func(o *obj) { o.secrets = map[string]string{"dbPassword": "s3cr3t-value"} }
	f.apply(f.target(k, "v1", secret))
	if got := f.file(k); got != "hola v1" {
		t.Fatalf("v1 wrote %q, want the source stack file's greeting", got)
	}
	own := filepath.Join(f.rt.Root, k.Application, k.Service, k.ReleaseChannel, programDirName, "Pulumi.src-staging.yaml")
	salt := func() string {
		b, err := os.ReadFile(own)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "encryptionsalt:") {
				return l
			}
		}
		t.Fatalf("the copy's stack file has no encryption salt:\n%s", b)
		return ""
	}
	first := salt()
	f.apply(f.target(k, "v2", secret, func(o *obj) { o.config["extra"] = "1" }))
	if got, s := f.file(k), salt(); got != "hola v2" || s != first {
		t.Errorf("after a config change: %q, salt %q (was %q)", got, s, first)
	}

	// A restart: a new runtime over the same data directory.
	dataDir := filepath.Dir(filepath.Dir(f.rt.Root))
	if err := f.rt.Close(); err != nil {
		t.Fatal(err)
	}
	rt, err := NewWith(&config.Runtime{Name: "pu", PulumiRunner: f.runner}, runtimes.Options{DataDir: dataDir, Runs: f}, testSettings(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	f.rt = rt
	f.apply(f.target(k, "v3", secret))
	if got, s := f.file(k), salt(); got != "hola v3" || s != first {
		t.Errorf("after a restart: %q, salt %q (was %q)", got, s, first)
	}
	// The source changes: copied, with the copy's secrets provider.
	if err := os.WriteFile(source, []byte("config:\n  drovertest:greeting: adios\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.apply(f.target(k, "v4", secret))
	if got, s := f.file(k), salt(); got != "adios v4" || s != first {
		t.Errorf("after the source changed: %q, salt %q (was %q)", got, s, first)
	}
	if st := f.fetch(f.target(k, "v4", secret)); !st.Converged {
		t.Errorf("v4 not converged: %+v", st)
	}
}

// TestSourceStackFileConfined: a source stack file that is a link out of
// the program roots, or a FIFO, is refused naming it (the copy of the
// program confines every other file so; a FIFO would block).
func TestSourceStackFileConfined(t *testing.T) {
	t.Parallel()
	outside := filepath.Join("/var/tmp", "drover-pulumi-outside-"+filepath.Base(t.TempDir()))
	if err := os.WriteFile(outside, []byte("config: {}\n"), 0o600); err != nil {
		t.Skipf("cannot write outside the temporary directory: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(outside) })
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"link", func(p string) error { return os.Symlink(outside, p) }, "outside the allowed program directories"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "a FIFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			k := ikey("conf"+tc.name, "staging")
			if err := tc.make(filepath.Join(f.program, "Pulumi.conf"+tc.name+"-staging.yaml")); err != nil {
				t.Fatal(err)
			}
			_, err := f.rt.Fetch(t.Context(), f.target(k, "v1"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Pulumi.conf"+tc.name+"-staging.yaml") {
				t.Errorf("fetch: %v, want an error naming the stack file and %q", err, tc.want)
			}
		})
	}
}
