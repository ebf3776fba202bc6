package cli

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/version"
)

func TestVersionPrintsBuild(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runMain("version")
	if code != exitOK || !strings.HasPrefix(stdout, "drover "+version.Info().String()) || !strings.Contains(stdout, runtime.Version()) {
		t.Errorf("drover version: exit %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = runMain("version", "-o", "json")
	var b version.Build
	if err := json.Unmarshal([]byte(stdout), &b); code != exitOK || err != nil || b.Version == "" || b.GoVersion != runtime.Version() || b.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("drover version -o json: exit %d %v %q", code, err, stdout)
	}
}
