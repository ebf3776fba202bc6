package desiredstate

import (
	"strings"
	"testing"
)

func TestManagedNamespace(t *testing.T) {
	t.Parallel()
	if got := ManagedNamespace("shop", "prod"); got != "drover-shop-prod" {
		t.Errorf("short name: %q", got)
	}
	long := ManagedNamespace(strings.Repeat("a", 40), strings.Repeat("b", 40))
	if len(long) > 63 || !strings.HasPrefix(long, "drover-aaaa") {
		t.Errorf("long name %q (%d chars)", long, len(long))
	}
	if long != ManagedNamespace(strings.Repeat("a", 40), strings.Repeat("b", 40)) {
		t.Error("not deterministic")
	}
}
