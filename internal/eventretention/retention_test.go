package eventretention

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// TestPassArchivesThenPrunes: events older than the horizon are written
// to the archive, then deleted; the rest, and the newest event, stay; a
// second pass finds nothing; another server's pass in progress makes it
// do nothing.
func TestPassArchivesThenPrunes(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var evs []store.Event
	for i := range 12 {
		// Events 0-7 are 40 days old, 8-11 are a day old.
		at := now.Add(-40 * 24 * time.Hour).Add(time.Duration(i) * time.Minute)
		if i >= 8 {
			at = now.Add(-24 * time.Hour).Add(time.Duration(i) * time.Minute)
		}
		evs = append(evs, store.Event{Time: at, Application: "shop", Service: "web", Type: "pushed", Message: "push " + string(rune('a'+i))})
	}
	if err := st.AppendEvents(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "archive")
	cfg := Config{Horizon: 30 * 24 * time.Hour, ArchiveDir: dir, Owner: "me", Now: func() time.Time { return now }}

	other, err := st.ClaimLease(t.Context(), leaseKey, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Pass(t.Context(), st, cfg); n != 0 || err != nil {
		t.Fatalf("pass while another server holds the lease: %d, %v", n, err)
	}
	if err := st.ReleaseLease(t.Context(), other); err != nil {
		t.Fatal(err)
	}

	n, err := Pass(t.Context(), st, cfg)
	if err != nil || n != 8 {
		t.Fatalf("pass: %d, %v; want 8", n, err)
	}
	left, err := st.ListEvents(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 4 || left[0].Seq != evs[8].Seq {
		t.Errorf("left: %d events from %d, want 4 from %d", len(left), left[0].Seq, evs[8].Seq)
	}
	files, err := filepath.Glob(filepath.Join(dir, "events-*.jsonl"))
	if err != nil || len(files) != 1 {
		t.Fatalf("archive files %v, %v", files, err)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("archive file mode: %v, %v", fi, err)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	i := 0
	for sc.Scan() {
		var got dump.Event
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if want := evs[i]; got.Seq != want.Seq || !got.Time.Equal(want.Time) || got.Message != want.Message {
			t.Errorf("archived event %d: %+v, want %+v", i, got, want)
		}
		i++
	}
	if i != 8 {
		t.Errorf("%d events archived, want 8", i)
	}
	if n, err := Pass(t.Context(), st, cfg); n != 0 || err != nil {
		t.Errorf("second pass: %d, %v", n, err)
	}
	// Even with everything past the horizon, the newest event stays.
	cfg.Now = func() time.Time { return now.Add(365 * 24 * time.Hour) }
	if n, err := Pass(t.Context(), st, cfg); n != 3 || err != nil {
		t.Errorf("pass with every event old: %d, %v; want 3", n, err)
	}
	if last, err := st.LastEventSeq(t.Context()); err != nil || last != evs[11].Seq {
		t.Errorf("LastEventSeq = %d, %v", last, err)
	}
}
