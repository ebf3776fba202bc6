// Package pulumitest finds the pulumi CLI drover's Pulumi tests run
// (hack/pulumi-tools.sh builds it, with the YAML language host and the
// test provider, into one directory), waiting for CI's build of it.
//
// CI (.ci/run) builds the tools in the background while the rest of the
// suite runs, and names in $DROVER_PULUMI_READY the file the build writes
// its exit status to once it ends. Wait blocks until then; call it from
// TestMain, before m.Run, so the wait counts against no test's timeout.
package pulumitest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Environment variables the Pulumi tests read.
const (
	// BinEnv names the pulumi binary (else pulumi on PATH).
	BinEnv = "DROVER_PULUMI_BIN"
	// RequireEnv=1 makes a missing binary a failure, not a skip (CI).
	RequireEnv = "DROVER_REQUIRE_PULUMI"
	// ReadyEnv names the file a background build writes its exit status to.
	ReadyEnv = "DROVER_PULUMI_READY"
)

// MaxWait is how long Wait waits for a background build.
const MaxWait = 40 * time.Minute

// Wait returns once the background build named by $DROVER_PULUMI_READY
// (if any) has ended, with an error if it failed or did not end within
// MaxWait. Without the variable it returns at once.
func Wait() error {
	ready := os.Getenv(ReadyEnv)
	if ready == "" {
		return nil
	}
	start := time.Now()
	said := false
	for {
		b, err := os.ReadFile(ready) //nolint:gosec // G703: the path is the test environment's own setting
		if err == nil {
			if rc := strings.TrimSpace(string(b)); rc != "0" {
				return fmt.Errorf("the Pulumi tools' build (hack/pulumi-tools.sh) failed with exit status %s: its log is beside %s", rc, ready)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if time.Since(start) > MaxWait {
			return fmt.Errorf("the Pulumi tools' build (hack/pulumi-tools.sh) did not end within %s (%s does not exist)", MaxWait, ready)
		}
		if !said {
			fmt.Fprintf(os.Stderr, "pulumitest: waiting for the Pulumi tools' build to end (%s)\n", ready)
			said = true
		}
		time.Sleep(2 * time.Second)
	}
}

// Binary is the pulumi CLI: $DROVER_PULUMI_BIN, else pulumi on PATH.
func Binary() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		if _, err := os.Stat(p); err != nil { //nolint:gosec // G703: the path is the test environment's own setting
			return "", fmt.Errorf("%s=%s: %w", BinEnv, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("pulumi")
	if err != nil {
		return "", fmt.Errorf("no pulumi CLI: set %s or put one on PATH (hack/pulumi-tools.sh builds one)", BinEnv)
	}
	return p, nil
}

// Required reports whether a missing binary must fail the tests.
func Required() bool { return os.Getenv(RequireEnv) == "1" }
