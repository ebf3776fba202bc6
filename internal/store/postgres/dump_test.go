package postgres

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
)

// records returns a next function over recs, for Import.
func records(recs ...dump.Record) func() (dump.Record, error) {
	return func() (dump.Record, error) {
		if len(recs) == 0 {
			return nil, io.EOF
		}
		r := recs[0]
		recs = recs[1:]
		return r, nil
	}
}

// TestExportIsOneSnapshot: what other sessions commit while an export runs
// is not in the dump, whichever table it is written to.
func TestExportIsOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	for _, name := range []string{"a", "b"} {
		if _, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "runtime", Name: name, Hash: name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendEvents(ctx, store.Event{Type: "configured", Message: "before"}); err != nil {
		t.Fatal(err)
	}
	var got []dump.Record
	err := s.Export(ctx, func(r dump.Record) error {
		if len(got) == 0 {
			if _, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "runtime", Name: "c", Hash: "c"}); err != nil {
				return err
			}
			if err := s.AppendEvents(ctx, store.Event{Type: "configured", Message: "during"}); err != nil {
				return err
			}
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("exported %d records, want the 2 configs and 1 event committed before: %+v", len(got), got)
	}
	if e, ok := got[2].(dump.Event); !ok || e.Message != "before" {
		t.Errorf("last record %+v, want the event written before the export", got[2])
	}
}

// TestImportMovesSequences: after an import, events, task runs, tasks, API
// tokens, audit records and deliveries are numbered after the largest imported ids (not
// their count), desired states keep their order, lease tokens go on, and
// free text that PostgreSQL cannot hold is stored as the store's own writes
// store it.
func TestImportMovesSequences(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	// A session of the store before the import does not survive it.
	if _, err := s.CreateSession(ctx, store.Session{Hash: "5e55", Identity: "alice", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	err := s.Import(ctx, records(
		dump.DesiredState{ID: "one", Application: "shop", Service: "web", Compiled: []byte("{}"), CreatedAt: at.Add(time.Hour), ReplacedBy: "two"},
		dump.DesiredState{ID: "two", Application: "shop", Service: "web", CompiledFrom: "one", CreatedAt: at},
		dump.Event{Seq: 5, Time: at, Type: "a", Message: "bad \xff byte and \x00"},
		dump.Event{Seq: 100, Time: at, Type: "b"},
		dump.TaskRun{ID: 50, Application: "shop", Service: "web", ReleaseChannel: "prod", Kind: "apply", StartedAt: at, FinishedAt: at,
			Stdout: []byte("\x00\xff")},
		dump.Task{ID: 70, Key: "shop/web", Kind: "apply", Status: store.TaskSucceeded, CreatedAt: at},
		dump.Lease{Key: "shop/web", Owner: "gone", Token: 41, Expires: at},
		dump.APIToken{ID: 4, Name: "ci", Hash: "ab12", CreatedAt: at, RevokedAt: at, RevokedBy: "alice"},
		dump.APIToken{ID: 9, Name: "ci", Hash: "cd34", Roles: []string{"viewer"}, CreatedAt: at},
		dump.AuditRecord{Seq: 30, Time: at, Identity: "alice", Action: "POST /v1/tokens", Outcome: "ok", Message: "bad \xff byte"},
		dump.NotifyTarget{Name: "hooks", Kind: store.NotifyWebhook, Spec: []byte("sealed"), CreatedAt: at},
		dump.Delivery{ID: 60, Target: "hooks", Key: "shop/web", Type: "service.deployed", EventSeq: 100, State: store.DeliveryDead, Attempts: 5,
			NextAt: at, LastError: "gone \xff", CreatedAt: at},
		dump.Process{ID: 3, Kind: "apply", Handle: []byte("{}"), StartedAt: at},
	))
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListDesiredStates(ctx, "shop", "web", 0)
	if err != nil || len(list) != 2 || list[0].ID != "two" || string(list[0].Compiled) != "{}" {
		t.Fatalf("desired states %+v, %v; want two (sharing one's copy) first", list, err)
	}
	if evs, err := s.ListEvents(ctx, store.EventFilter{Limit: 1}); err != nil || len(evs) != 1 || evs[0].Message != "bad \uFFFD byte and \uFFFD" {
		t.Errorf("events %+v, %v; want the message cleaned", evs, err)
	}
	if recs, err := s.ListAudit(ctx, store.AuditFilter{}); err != nil || len(recs) != 1 || recs[0].Message != "bad \uFFFD byte" {
		t.Errorf("audit records %+v, %v; want the message cleaned", recs, err)
	}
	if r, err := s.GetRun(ctx, 50); err != nil || r.Stdout != "\x00\xff" {
		t.Errorf("run 50 %+v, %v; want its output byte for byte", r, err)
	}
	evs := []store.Event{{Type: "c"}}
	if err := s.AppendEvents(ctx, evs...); err != nil || evs[0].Seq != 101 {
		t.Errorf("next event seq %d (%v), want 101", evs[0].Seq, err)
	}
	if id, err := s.RecordRun(ctx, store.TaskRun{Application: "shop", Service: "web", ReleaseChannel: "prod", Kind: "fetch"}); err != nil || id != 51 {
		t.Errorf("next run id %d (%v), want 51", id, err)
	}
	b := &store.Batch{Tasks: []store.Task{{Key: "shop/web", Kind: "apply"}}}
	if err := s.Write(ctx, b); err != nil || b.Tasks[0].ID != 71 {
		t.Errorf("next task id %d (%v), want 71", b.Tasks[0].ID, err)
	}
	if l, err := s.ClaimLease(ctx, "shop/web", "engine", time.Minute); err != nil || l.Token != 42 {
		t.Errorf("lease claimed after the import: %+v, %v; want token 42", l, err)
	}
	if tok, err := s.APITokenByHash(ctx, "cd34"); err != nil || tok.ID != 9 || tok.Name != "ci" || len(tok.Roles) != 1 {
		t.Errorf("token by hash after the import: %+v, %v; want token 9", tok, err)
	}
	if tok, err := s.CreateAPIToken(ctx, store.APIToken{Name: "robot", Hash: "ef56"}); err != nil || tok.ID != 10 {
		t.Errorf("next token id %d (%v), want 10", tok.ID, err)
	}
	if seq, err := s.AppendAudit(ctx, store.AuditRecord{Identity: "alice", Action: "POST /v1/x", Outcome: "ok"}); err != nil || seq != 31 {
		t.Errorf("next audit seq %d (%v), want 31", seq, err)
	}
	conv := store.Event{Application: "shop", Service: "web", ReleaseChannel: "prod", Type: ds.EventConverged, Data: []byte(`{"version":"v1"}`)}
	if err := s.AppendEvents(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListDeliveries(ctx, store.DeliveryFilter{Target: "hooks"}); err != nil || len(got) != 2 || got[0].ID != 61 ||
		got[1].ID != 60 || got[1].State != store.DeliveryDead || got[1].LastError != "gone \uFFFD" || got[1].Event.Type != "b" {
		t.Errorf("deliveries %+v, %v; want 60 (dead, of event 100) and the next, 61", got, err)
	}
	if procs, err := s.ListProcesses(ctx); err != nil || len(procs) != 0 {
		t.Errorf("processes %v, %v; want none imported", procs, err)
	}
	if got, err := s.ListSessions(ctx); err != nil || len(got) != 0 {
		t.Errorf("sessions %v, %v; want the one of before the import deleted", got, err)
	}
}

// TestImportWritesAllOrNothing: an import that fails on a record (in any
// batch), or on an error of its input, writes nothing; one into a store
// holding a record is refused before it writes.
func TestImportWritesAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	// A session is not a record an import checks for: a failed import
	// keeps it (an import that succeeds deletes it).
	if _, err := s.CreateSession(ctx, store.Session{Hash: "5e55", Identity: "alice", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	var recs []dump.Record
	for i := range 2*importBatch + 10 {
		recs = append(recs, dump.Event{Seq: int64(i + 1), Time: at, Type: "x"})
	}
	recs = append(recs, dump.Event{Seq: 1, Time: at, Type: "again"})
	err := s.Import(ctx, records(recs...))
	if err == nil || !strings.Contains(err.Error(), "event 1:") || !errors.Is(err, store.ErrConflict) {
		t.Errorf("import of a duplicate event: %v, want a conflict naming it", err)
	}
	broken := errors.New("line 7: broken")
	n := 0
	err = s.Import(ctx, func() (dump.Record, error) {
		if n++; n > 1 {
			return nil, broken
		}
		return dump.Config{Kind: "runtime", Name: "k8s", Version: 1, Hash: "h", CreatedAt: at}, nil
	})
	if !errors.Is(err, broken) {
		t.Errorf("import of a broken input: %v, want its error", err)
	}
	if evs, err := s.ListEvents(ctx, store.EventFilter{}); err != nil || len(evs) != 0 {
		t.Errorf("%d events after failed imports (%v); want none", len(evs), err)
	}
	if cs, err := s.ListConfigs(ctx); err != nil || len(cs) != 0 {
		t.Errorf("configs after failed imports: %v, %v; want none", cs, err)
	}
	if err := s.PutRuntimeFacts(ctx, store.RuntimeFacts{Runtime: "k8s"}); err != nil {
		t.Fatal(err)
	}
	err = s.Import(ctx, records(dump.Event{Seq: 1, Time: at, Type: "x"}))
	if !errors.Is(err, dump.ErrNotEmpty) || !strings.Contains(err.Error(), "1 runtime facts") {
		t.Errorf("import into a store with runtime facts: %v, want ErrNotEmpty", err)
	}
	if evs, err := s.ListEvents(ctx, store.EventFilter{}); err != nil || len(evs) != 0 {
		t.Errorf("%d events (%v); want none", len(evs), err)
	}
	if got, err := s.ListSessions(ctx); err != nil || len(got) != 1 {
		t.Errorf("sessions %v, %v; want the one of before the failed imports", got, err)
	}
}
