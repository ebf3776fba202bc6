package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/store"
)

// The audit log: every request to a mutating route is recorded, allowed or
// refused, with who sent it, from where, what it named and how it ended.
// The record is written before the answer leaves: a client that saw its
// request succeed finds it in the log.

// auditNote is what a handler adds to its request's audit record: the
// release channel or the object it acted on, known only from the body.
type auditNote struct {
	releaseChannel, target string
	// ok builds the record of the request as answered with 200. A
	// handler that writes it itself, with the change it records, in one
	// transaction, sets written: the record is then not written again.
	ok      func() store.AuditRecord
	written bool
}

type auditKey struct{}

// noteAudit records target (a runtime, a token, a freeze) as what the
// request acts on, for its audit record.
func noteAudit(ctx context.Context, target string) {
	if n, ok := ctx.Value(auditKey{}).(*auditNote); ok {
		n.target = target
	}
}

// noteAuditChannel records the release channel the request acts on.
func noteAuditChannel(ctx context.Context, rc string) {
	if n, ok := ctx.Value(auditKey{}).(*auditNote); ok {
		n.releaseChannel = rc
	}
}

// auditOK returns the audit record of ctx's request as answered with 200,
// for a handler that writes it with its change (then calling auditWritten),
// and false outside an audited request.
func auditOK(ctx context.Context) (store.AuditRecord, bool) {
	n, ok := ctx.Value(auditKey{}).(*auditNote)
	if !ok || n.ok == nil {
		return store.AuditRecord{}, false
	}
	return n.ok(), true
}

// auditWritten says the handler wrote its request's audit record.
func auditWritten(ctx context.Context) {
	if n, ok := ctx.Value(auditKey{}).(*auditNote); ok {
		n.written = true
	}
}

// auditWriter holds a mutating route's answer until its audit record is
// written.
type auditWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *auditWriter) Header() http.Header { return w.header }

func (w *auditWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *auditWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

// audited runs h for a mutating route, records the request in the audit
// log, then sends h's answer.
func (s *Server) audited(rt route, w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	note := &auditNote{}
	r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
	record := func(status int) store.AuditRecord {
		id, _ := auth.FromContext(r.Context())
		rec := store.AuditRecord{
			Time: s.now(), Identity: id.Name, IdentityKind: id.Kind, Source: r.RemoteAddr, Action: rt.method + " " + rt.path,
			Application: r.PathValue("app"), Service: r.PathValue("svc"), ReleaseChannel: note.releaseChannel, Target: note.target,
			Status: status, Outcome: "ok",
		}
		if rt.path == "/v1/runtimes/{name}:rotateToken" || rt.path == "/v1/runtimes/{name}:unlink" {
			rec.Target = "runtime " + r.PathValue("name")
		}
		if strings.HasPrefix(rt.path, "/v1/notifications/{name}") {
			rec.Target = "notification target " + r.PathValue("name")
		}
		if rec.Identity == "" {
			rec.Identity = "anonymous"
		}
		return rec
	}
	note.ok = func() store.AuditRecord { return record(http.StatusOK) }
	// The body's read deadline is lifted by writes through the real
	// writer (bodyRead); the buffered answer goes through it.
	aw := &auditWriter{header: w.Header()}
	h(aw, r)
	if aw.status == 0 {
		aw.status = http.StatusOK
	}
	if note.written {
		// Written with the change: the handler succeeded.
		w.WriteHeader(aw.status)
		_, _ = w.Write(aw.body.Bytes())
		return
	}
	rec := record(aw.status)
	if aw.status >= 400 {
		var e apiv1.ErrorResponse
		if json.Unmarshal(aw.body.Bytes(), &e) == nil && e.Error.Code != "" {
			rec.Outcome, rec.Message = string(e.Error.Code), e.Error.Message
		} else {
			rec.Outcome = http.StatusText(aw.status)
		}
	}
	// The request's context may be gone (the client left): the record is
	// written all the same.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	if _, err := s.store.AppendAudit(ctx, rec); err != nil {
		s.auditFailed(err, rec)
	}
	w.WriteHeader(aw.status)
	_, _ = w.Write(aw.body.Bytes())
}

// auditRefusal records a change the edge refused before any route ran (no
// or a bad credential, a foreign Host or Origin, not JSON). Whoever reaches
// the port can send those: each source address's records are rate limited
// (as an identity's changes are), beyond which they are only counted.
func (s *Server) auditRefusal(r *http.Request, status int, code apiv1.ErrorCode, msg string) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
		return
	}
	source := sourceHost(r)
	if ok, _ := s.limits.mutation(auth.Identity{Name: "source " + source, Kind: "address"}); !ok {
		s.log.Debug("refused request not audited: its source sends too many", "source", source)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	rec := store.AuditRecord{Time: s.now(), Identity: "unauthenticated", Source: r.RemoteAddr, Action: r.Method + " " + r.URL.Path,
		Status: status, Outcome: string(code), Message: msg}
	if _, err := s.store.AppendAudit(ctx, rec); err != nil {
		s.auditFailed(err, rec)
	}
}

// auditFailed reports an audit record the store did not take: in the log
// and in drover_audit_write_errors_total.
func (s *Server) auditFailed(err error, rec store.AuditRecord) {
	s.log.Error("audit record not written", "error", err, "action", rec.Action, "identity", rec.Identity, "status", rec.Status)
	if s.edgeCfg.Metrics != nil {
		s.edgeCfg.Metrics.AuditFailed()
	}
}

// listAudit is a page of the audit log: records of the applications the
// caller may audit (those of no application for an auditor of every one).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.AuditFilter{Application: q.Get("app"), Identity: q.Get("identity")}
	var err error
	if v := q.Get("after"); v != "" {
		if f.AfterSeq, err = strconv.ParseInt(v, 10, 64); err != nil {
			writeError(w, s, errorf(apiv1.CodeInvalidArgument, "after %q is not a number", v))
			return
		}
	}
	if v := q.Get("since"); v != "" {
		if f.Since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			writeError(w, s, errorf(apiv1.CodeInvalidArgument, "since %q is not an RFC 3339 time", v))
			return
		}
	}
	limit := 500
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 5000 {
			writeError(w, s, errorf(apiv1.CodeInvalidArgument, "limit %q: want 1 to 5000", v))
			return
		}
	}
	id, _ := auth.FromContext(r.Context())
	if f.Application != "" && !id.Can(auth.PermAudit, f.Application, "") {
		writeError(w, s, denied(id, auth.PermAudit, "application "+f.Application))
		return
	}
	out := &apiv1.AuditList{Records: []apiv1.AuditRecord{}}
	// Pages are read until limit records the caller may see are found or
	// the log ends. A full page says where the next begins (it may be
	// empty).
	f.Limit = limit
	// An auditor of some applications filters here: at most maxAuditScan
	// pages are read per request; a short page then says where to go on.
	const maxAuditScan = 20
	for page := 0; ; page++ {
		if page == maxAuditScan {
			out.Next = f.AfterSeq
			reply(w, s, out, nil)
			return
		}
		recs, err := s.store.ListAudit(r.Context(), f)
		if err != nil {
			writeError(w, s, err)
			return
		}
		for _, rec := range recs {
			f.AfterSeq = rec.Seq
			if id.Can(auth.PermAudit, rec.Application, "") {
				out.Records = append(out.Records, apiv1.AuditRecord(rec))
			}
			if len(out.Records) == limit {
				out.Next = rec.Seq
				reply(w, s, out, nil)
				return
			}
		}
		if len(recs) < f.Limit {
			break
		}
	}
	reply(w, s, out, nil)
}
