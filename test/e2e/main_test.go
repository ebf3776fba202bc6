package e2e

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testing/pgtest"
	"github.com/drover-dev/drover/internal/testing/pulumitest"
)

// buildTags are the build tags of the binary under test: the Makefile's
// BUILD_TAGS, which every build of drover uses (TestBuildTagsAgree checks).
const buildTags = "kustomize_disable_go_plugin_support"

var (
	// raceEnabled is set by race_test.go when the tests run with -race.
	raceEnabled bool
	// droverBin is the binary under test, built once by TestMain.
	droverBin string
	// repoRoot is the module root (where go.mod is).
	repoRoot string
	// configHome is XDG_CONFIG_HOME of every drover the tests run, so that
	// servers record their tokens there and never in the user's own config
	// directory.
	configHome string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test calls requireE2E and skips; nothing to build.
		os.Exit(m.Run())
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	root, err := findRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot find the repository root:", err)
		return 1
	}
	repoRoot = root
	// CI builds the Pulumi tools in the background: wait for them here,
	// where the wait counts against no test's timeout.
	pulumiWaitErr = pulumitest.Wait()
	dir, err := os.MkdirTemp("", "drover-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	configHome = filepath.Join(dir, "config")
	if bin := os.Getenv("DROVER_E2E_BIN"); bin != "" {
		// A prebuilt binary (e.g. of another revision); nothing to build.
		droverBin = bin
		return runThenStop(m)
	}
	droverBin = filepath.Join(dir, "drover")
	args := []string{"build", "-tags", buildTags, "-o", droverBin}
	if raceEnabled && os.Getenv("DROVER_E2E_RACE") != "0" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/drover")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	return runThenStop(m)
}

// runThenStop runs the tests, then stops the PostgreSQL server they shared
// (if one was started).
func runThenStop(m *testing.M) int {
	defer pgtest.Stop()
	return m.Run()
}

// findRepoRoot asks the go command for the module's go.mod, falling back to
// the location of this source file.
func findRepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("go env GOMOD names no go.mod and the test's source file is unknown")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", err
	}
	return root, nil
}

// requireE2E skips the test in -short mode and marks it parallel.
func requireE2E(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	t.Parallel()
}
