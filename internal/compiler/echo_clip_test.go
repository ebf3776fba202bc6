package compiler

import (
	"strings"
	"testing"
)

// TestClipMessageKeepsCause: a message too long is cut in its middle, so
// that what failed (its start) and why (its end, where wrapped errors put
// the cause) both remain.
func TestClipMessageKeepsCause(t *testing.T) {
	t.Parallel()
	msg := "kustomize deploy/overlays/prod: accumulating resources: " + strings.Repeat("x", 3*maxMessage) + ": evalsymlink failure: no such file or directory"
	got := clipMessage(msg)
	if len(got) > maxMessage+100 {
		t.Errorf("clipped to %d bytes", len(got))
	}
	if !strings.HasPrefix(got, "kustomize deploy/overlays/prod: accumulating resources: ") || !strings.HasSuffix(got, ": evalsymlink failure: no such file or directory") || !strings.Contains(got, "bytes cut out of") {
		t.Errorf("clipped: %.200s ... %.200s", got, got[len(got)-200:])
	}
	if short := "short"; clipMessage(short) != short {
		t.Error("a short message changed")
	}
}
