package pulumitest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWait: Wait returns once the build's status is written: nil for 0,
// an error naming the status otherwise, and at once without ReadyEnv.
func TestWait(t *testing.T) {
	t.Setenv(ReadyEnv, "")
	if err := Wait(); err != nil {
		t.Fatalf("without %s: %v", ReadyEnv, err)
	}
	for _, tc := range []struct{ rc, want string }{{"0", ""}, {"2", "exit status 2"}} {
		ready := filepath.Join(t.TempDir(), "rc")
		t.Setenv(ReadyEnv, ready)
		go func() {
			time.Sleep(100 * time.Millisecond)
			_ = os.WriteFile(ready, []byte(tc.rc+"\n"), 0o644)
		}()
		err := Wait()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("status %s: %v, want %q", tc.rc, err, tc.want)
		}
	}
}
