package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// TestKeptMemo: an apply's memo is kept as given when it is JSON of at
// most runtimes.MaxMemo bytes; none keeps the recorded one; anything else
// is not kept.
func TestKeptMemo(t *testing.T) {
	t.Parallel()
	big := json.RawMessage(`"` + strings.Repeat("x", runtimes.MaxMemo) + `"`)
	for _, c := range []struct {
		memo json.RawMessage
		want string
		ok   bool
	}{
		{nil, "", true},
		{json.RawMessage(`{"version":"v1"}`), `{"version":"v1"}`, true},
		{json.RawMessage(`{"version":`), "", false},
		{big, "", false},
	} {
		if got, ok := keptMemo(c.memo); got != c.want || ok != c.ok {
			t.Errorf("keptMemo(%.20s) = %q, %v; want %q, %v", c.memo, got, ok, c.want, c.ok)
		}
	}
	if m := memoOf(&store.Instance{RuntimeMemo: `{"a":1}`}); string(m) != `{"a":1}` {
		t.Errorf("memoOf = %s", m)
	}
	if m := memoOf(nil); m != nil {
		t.Errorf("memoOf(nil) = %s", m)
	}
}
