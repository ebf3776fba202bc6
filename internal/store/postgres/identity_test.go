package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/store"
)

// TestTokenErrorsHideHash: the errors of token writes and reads never quote
// a token's hash (PostgreSQL's own error does, in its detail).
func TestTokenErrorsHideHash(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	const hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	if _, err := s.CreateAPIToken(ctx, store.APIToken{Name: "ci", Hash: hash}); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreateAPIToken(ctx, store.APIToken{Name: "other", Hash: hash})
	if !errors.Is(err, store.ErrConflict) || strings.Contains(err.Error(), hash) {
		t.Errorf("a second token of one hash: %v, want ErrConflict without the hash", err)
	}
	_, err = s.APITokenByHash(ctx, hash[:60]+"ffff")
	if !errors.Is(err, store.ErrNotFound) || strings.Contains(err.Error(), hash[:60]) {
		t.Errorf("an unknown hash: %v, want ErrNotFound without the hash", err)
	}
}

// TestAuditCommitsInSeqOrder: while requests append audit records
// concurrently, a reader paging with AfterSeq never skips one (without the
// audit lock, a transaction could commit a smaller seq after the reader
// moved past it).
func TestAuditCommitsInSeqOrder(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	checkPagedReader(t, "audit record", func(w, _ int) error {
		_, err := s.AppendAudit(ctx, store.AuditRecord{Identity: string(rune('a' + w)), Action: "POST /v1/x", Status: 200, Outcome: "ok"})
		return err
	}, func(after int64) ([]int64, error) {
		recs, err := s.ListAudit(ctx, store.AuditFilter{AfterSeq: after})
		out := make([]int64, len(recs))
		for i, r := range recs {
			out[i] = r.Seq
		}
		return out, err
	})
}

// TestAuditTextCleaned: a request is recorded whatever bytes it named (NUL,
// invalid UTF-8), with U+FFFD in their place, and a filter naming them finds
// it.
func TestAuditTextCleaned(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	r := store.AuditRecord{Identity: "bob\x00", Action: "POST /v1/apps/{app}:pause", Application: "sh\xffop",
		Target: "x\xfe", Status: 400, Outcome: "invalid_argument", Message: "invalid name \"sh\xffop\""}
	if _, err := s.AppendAudit(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListAudit(ctx, store.AuditFilter{Application: "sh\xffop", Identity: "bob\x00"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Application != "sh\uFFFDop" || got[0].Identity != "bob\uFFFD" || got[0].Target != "x\uFFFD" ||
		got[0].Message != "invalid name \"sh\uFFFDop\"" {
		t.Errorf("records %+v, want the one appended with its text cleaned", got)
	}
}
