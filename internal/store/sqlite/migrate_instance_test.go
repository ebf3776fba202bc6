package sqlite

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestMigrateInstanceExtraToColumns opens a database a binary that knew
// migrations 0001-0004 wrote, with the engine's bookkeeping as JSON in
// instances.extra (one valid, one damaged, one empty), and checks that Open
// moves the values into the instance's fields.
func TestMigrateInstanceExtraToColumns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "drover.db")
	if len(migrations) < 5 || migrations[4].Name != "0005_instance_fields.sql" {
		t.Fatalf("unexpected migrations %v", migrations)
	}
	old, err := open(ctx, path, migrations[:4])
	if err != nil {
		t.Fatal(err)
	}
	appliedAt := time.Date(2026, 11, 20, 10, 11, 12, 130000000, time.UTC)
	extra := `{"previousStateId":"ds-1","previousVersion":"v-1","desiredVersion":"v-3","satisfied":["staging@v-3"],` +
		`"rollbackFrom":"v-2","rollbackReason":"manual rollback by alice","failedVersion":"v-2","healed":4,` +
		`"actionSeq":2,"actionPending":true,"appliedAt":"2026-11-20T10:11:12.13Z"}`
	for rc, x := range map[string]any{"prod": []byte(extra), "canary": []byte(`not json`), "staging": nil} {
		if _, err := old.write.ExecContext(ctx, `INSERT INTO instances (application, service, release_channel, status, extra, revision)
			VALUES ('shop', 'web', ?, 'CONVERGED', ?, 1)`, rc, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.GetInstance(ctx, "shop", "web", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if got.PreviousStateID != "ds-1" || got.PreviousVersion != "v-1" || got.DesiredVersion != "v-3" ||
		!reflect.DeepEqual(got.Satisfied, []string{"staging@v-3"}) || got.RollbackFrom != "v-2" ||
		got.RollbackReason != "manual rollback by alice" || got.FailedVersion != "v-2" || got.Healed != 4 ||
		got.ActionSeq != 2 || !got.ActionPending || !got.AppliedAt.Equal(appliedAt) || got.Status != "CONVERGED" {
		t.Errorf("migrated instance: %+v", got)
	}
	for _, rc := range []string{"canary", "staging"} {
		got, err := s.GetInstance(ctx, "shop", "web", rc)
		if err != nil {
			t.Fatal(err)
		}
		if got.PreviousStateID != "" || got.Satisfied != nil || got.Healed != 0 || !got.AppliedAt.IsZero() || got.Revision != 1 {
			t.Errorf("%s (extra damaged or empty) migrated to %+v, want empty bookkeeping", rc, got)
		}
	}
}
