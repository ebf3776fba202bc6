package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// TestMigrateV1ToTaskRuns opens a database created by a binary that knew only
// migration 0001 (holding data) and checks that Open adds task_runs without
// touching the rest.
func TestMigrateV1ToTaskRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "drover.db")
	if migrations[0].Name != "0001_init.sql" || len(migrations) < 2 || migrations[1].Name != "0002_task_runs.sql" {
		t.Fatalf("unexpected migrations %v", migrations)
	}
	old, err := open(ctx, path, migrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	if tableExists(t, old, "task_runs") {
		t.Fatal("version 1 database has task_runs")
	}
	// Data as a version 1 binary wrote it.
	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO desired_states (id, application, service, version, compiled, created_at) VALUES (?, ?, ?, ?, ?, ?)",
			[]any{"ds-1", "shop", "web", "1.0.0", []byte(`{}`), dbTime(created)}},
		{"INSERT INTO events (time, application, service, type, message) VALUES (?, ?, ?, ?, ?)",
			[]any{dbTime(created), "shop", "web", "pushed", "pushed 1.0.0"}},
	} {
		if _, err := old.write.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	if got := appliedMigrations(t, old); len(got) != 1 {
		t.Fatalf("applied = %v, want version 1 only", got)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := appliedMigrations(t, s)
	if len(got) != len(migrations) || got[1].version != 2 {
		t.Fatalf("applied after Open = %v, want versions 1-%d", got, len(migrations))
	}
	if !tableExists(t, s, "task_runs") {
		t.Fatal("task_runs missing after migration")
	}
	var idx int
	if err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'task_runs_instance_kind'").Scan(&idx); err != nil || idx != 1 {
		t.Errorf("index task_runs_instance_kind: %d (%v)", idx, err)
	}
	if got, err := s.GetDesiredState(ctx, "ds-1"); err != nil || !got.CreatedAt.Equal(created) || got.Version != "1.0.0" || string(got.Compiled) != `{}` {
		t.Errorf("desired state after migration: %+v, %v", got, err)
	}
	if evs, err := s.ListEvents(ctx, store.EventFilter{}); err != nil || len(evs) != 1 {
		t.Errorf("events after migration: %v, %v", evs, err)
	}
	id, err := s.RecordRun(ctx, store.TaskRun{Application: "shop", Service: "web", ReleaseChannel: "production", Kind: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, id); err != nil {
		t.Errorf("GetRun after migration: %v", err)
	}
}

// TestRunOutputBytes checks that output that is not UTF-8 text (a NUL,
// invalid sequences) comes back byte for byte.
func TestRunOutputBytes(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	r := store.TaskRun{Application: "shop", Service: "web", ReleaseChannel: "production", Kind: "apply",
		Stdout: "a\x00b\xff\xfe\xc3(end", Stderr: "\x80\x81\n\x00"}
	id, err := s.RecordRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stdout != r.Stdout || got.Stderr != r.Stderr {
		t.Errorf("output = %q, %q, want %q, %q", got.Stdout, got.Stderr, r.Stdout, r.Stderr)
	}
}

// TestRunQueriesUseIndex checks that pruning and listing an instance's runs
// of a kind use task_runs_instance_kind rather than scanning the table.
func TestRunQueriesUseIndex(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	defer s.Close()
	for _, q := range []string{
		pruneRuns,
		"SELECT " + runColumns + " FROM task_runs WHERE application = ?1 AND service = ?2 AND release_channel = ?3 AND kind = ?4 ORDER BY id DESC",
	} {
		rows, err := s.read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, "shop", "web", "production", "apply", runsKept)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		t.Logf("plan of %q: %s", q, p)
		if strings.Contains(p, "SCAN task_runs") || strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "task_runs_instance_kind") {
			t.Errorf("plan of %q: %s", q, p)
		}
	}
}
