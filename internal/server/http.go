package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/store"
)

// maxBody bounds request bodies (configs carry referenced files).
const maxBody = 64 << 20

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/health", s.health)
	m.HandleFunc("POST /v1/configs:apply", handle(s, func(r *http.Request, req apiv1.ApplyConfigsRequest) (any, error) {
		return s.applyConfigs(r.Context(), req)
	}))
	m.HandleFunc("GET /v1/configs", func(w http.ResponseWriter, r *http.Request) {
		out, err := s.listConfigs(r.Context(), r.URL.Query().Get("kind"))
		reply(w, s, out, err)
	})
	m.HandleFunc("GET /v1/services", func(w http.ResponseWriter, r *http.Request) {
		lw := &serviceListWriter{w: w}
		if err := s.listServices(r.Context(), lw.add); err != nil {
			if !lw.started {
				writeError(w, s, err)
				return
			}
			// Part of the list is sent: end the response broken, so the
			// client fails rather than take a part for the whole.
			if r.Context().Err() == nil { // not the client going away
				s.log.Warn("service list failed midway", "error", err)
			}
			panic(http.ErrAbortHandler)
		}
		lw.end()
	})
	m.HandleFunc("GET /v1/apps/{app}/services/{svc}", func(w http.ResponseWriter, r *http.Request) {
		out, err := s.status(r.Context(), r.PathValue("app"), r.PathValue("svc"))
		reply(w, s, out, err)
	})
	m.HandleFunc("POST /v1/apps/{app}/services/{svc}", func(w http.ResponseWriter, r *http.Request) {
		// Verbs are "/v1/apps/A/services/S:push"; the mux sees "S:push" as {svc}.
		s.serviceVerb(w, r)
	})
	m.HandleFunc("GET /v1/apps/{app}/services/{svc}/events", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		out, err := s.events(r.Context(), store.EventFilter{Application: r.PathValue("app"), Service: r.PathValue("svc"), AfterSeq: after, Limit: limit})
		reply(w, s, out, err)
	})
	m.HandleFunc("GET /v1/apps/{app}/services/{svc}/runs", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		out, err := s.runs(r.Context(), store.RunFilter{Application: r.PathValue("app"), Service: r.PathValue("svc"),
			ReleaseChannel: q.Get("releaseChannel"), Kind: q.Get("kind"), Limit: limit})
		reply(w, s, out, err)
	})
	m.HandleFunc("GET /v1/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			writeError(w, s, errorf("invalid_argument", "run id %q is not a number", r.PathValue("id")))
			return
		}
		out, err := s.run(r.Context(), id)
		reply(w, s, out, err)
	})
	m.HandleFunc("POST /v1/runtimes:link", handle(s, func(r *http.Request, req apiv1.LinkRuntimeRequest) (any, error) {
		return s.linkRuntime(r.Context(), req)
	}))
	m.HandleFunc("POST /v1/runtimes/{name}", handle(s, func(r *http.Request, req apiv1.LinkRuntimeRequest) (any, error) {
		name, verb, _ := strings.Cut(r.PathValue("name"), ":")
		switch verb {
		case "rotateToken":
			return s.rotateRuntimeToken(r.Context(), name, req)
		case "unlink":
			return s.unlinkRuntime(r.Context(), name)
		}
		return nil, errorf("not_found", "no such runtime verb %q: use :rotateToken or :unlink", verb)
	}))
	m.HandleFunc("GET /v1/runtimes", func(w http.ResponseWriter, r *http.Request) {
		out, err := s.listRuntimes(r.Context())
		reply(w, s, out, err)
	})
	m.HandleFunc("POST /v1/freezes", handle(s, func(r *http.Request, req apiv1.FreezeRequest) (any, error) {
		return s.freeze(r.Context(), req)
	}))
	m.HandleFunc("POST /v1/freezes:lift", handle(s, func(r *http.Request, req apiv1.UnfreezeRequest) (any, error) {
		return s.unfreeze(r.Context(), req)
	}))
	m.HandleFunc("GET /v1/freezes", func(w http.ResponseWriter, r *http.Request) {
		out, err := s.listFreezes(r.Context(), r.URL.Query().Get("all") == "true")
		reply(w, s, out, err)
	})
	m.HandleFunc("GET /v1/watch", s.watch)
	s.mux = m
}

func (s *Server) serviceVerb(w http.ResponseWriter, r *http.Request) {
	app := r.PathValue("app")
	svc, verb, ok := cutLast(r.PathValue("svc"), ":")
	if !ok {
		writeError(w, s, errorf("not_found", "unknown endpoint %s", r.URL.Path))
		return
	}
	ctx := r.Context()
	switch verb {
	case "push":
		handle(s, func(_ *http.Request, req apiv1.PushRequest) (any, error) { return s.push(ctx, app, svc, req) })(w, r)
	case "preview":
		handle(s, func(_ *http.Request, req apiv1.PushRequest) (any, error) { return s.preview(ctx, app, svc, req) })(w, r)
	case "approve":
		handle(s, func(_ *http.Request, req apiv1.ApproveRequest) (any, error) { return s.approve(ctx, app, svc, req) })(w, r)
	case "bypass":
		handle(s, func(_ *http.Request, req apiv1.BypassRequest) (any, error) { return s.bypass(ctx, app, svc, req) })(w, r)
	case "pause", "resume", "rollback":
		handle(s, func(_ *http.Request, req apiv1.ChannelRequest) (any, error) {
			user, err := optionalUser(req.User)
			if err != nil {
				return nil, err
			}
			if user == "" {
				user = "unknown"
			}
			return s.instanceAction(ctx, app, svc, req, func(inst store.Instance) (store.Instance, store.Event, bool, error) {
				now := s.now()
				switch verb {
				case "pause":
					next, ev, changed := engine.Pause(inst, user, now)
					return next, ev, changed, nil
				case "resume":
					next, ev, changed := engine.Resume(inst, user, now)
					return next, ev, changed, nil
				}
				next, ev, err := engine.Rollback(inst, user, now)
				return next, ev, err == nil, err
			})
		})(w, r)
	default:
		writeError(w, s, errorf("not_found", "unknown verb %q: use push, approve, pause, resume or rollback", verb))
	}
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// handle decodes a JSON request of type Req, calls fn and writes its result.
func handle[Req any](s *Server, fn func(*http.Request, Req) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		body := http.MaxBytesReader(w, r.Body, maxBody)
		dec := json.NewDecoder(body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, s, errorf("invalid_argument", "invalid request body: %v", err))
			return
		}
		if err := requireEOF(dec); err != nil {
			writeError(w, s, err)
			return
		}
		bodyRead(w)
		out, err := fn(r, req)
		reply(w, s, out, err)
	}
}

func reply(w http.ResponseWriter, s *Server, out any, err error) {
	if err != nil {
		writeError(w, s, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// serviceListWriter writes the service list as writeJSON would write an
// apiv1.ServiceList, one service at a time as they come: the list of every
// service can be tens of megabytes, which need not be in memory whole.
type serviceListWriter struct {
	w       http.ResponseWriter
	bw      *bufio.Writer
	enc     *json.Encoder
	started bool
	err     error
}

// add writes one service; its error is the connection's.
func (l *serviceListWriter) add(st *apiv1.ServiceStatus) error {
	if l.err != nil {
		return l.err
	}
	if !l.started {
		l.start()
	} else {
		_ = l.bw.WriteByte(',')
	}
	l.err = l.enc.Encode(st)
	return l.err
}

func (l *serviceListWriter) start() {
	l.started = true
	l.w.Header().Set("Content-Type", "application/json")
	l.w.WriteHeader(http.StatusOK)
	l.bw = bufio.NewWriterSize(l.w, 64<<10)
	l.enc = json.NewEncoder(l.bw)
	l.enc.SetEscapeHTML(false)
	_, _ = l.bw.WriteString(`{"services":[`)
}

// end completes the list.
func (l *serviceListWriter) end() {
	if !l.started {
		l.start()
	}
	if l.err != nil {
		return // the connection is gone
	}
	_, _ = l.bw.WriteString("]}\n")
	_ = l.bw.Flush()
}

func writeError(w http.ResponseWriter, s *Server, err error) {
	body := apiv1.Error{Code: "internal", Message: err.Error()}
	code := http.StatusInternalServerError
	var ae *apiError
	var ve *validationError
	switch {
	case errors.As(err, &ve):
		body.Code, body.Message, body.Details = "invalid_argument", "invalid configs", ve.details
		code = http.StatusBadRequest
	case errors.As(err, &ae):
		body.Code = ae.code
		code = httpStatus(ae.code)
	case errors.Is(err, store.ErrNotFound):
		body.Code, code = "not_found", http.StatusNotFound
	case errors.Is(err, store.ErrConflict):
		body.Code, code = "conflict", http.StatusConflict
	case errors.Is(err, store.ErrDuplicate):
		body.Code, code = "already_exists", http.StatusConflict
	}
	if code == http.StatusInternalServerError {
		s.log.Error("request failed", "error", err)
	}
	writeJSON(w, code, apiv1.ErrorResponse{Error: body})
}

func httpStatus(code string) int {
	switch code {
	case "invalid_argument":
		return http.StatusBadRequest
	case "not_found":
		return http.StatusNotFound
	case "failed_precondition", "conflict", "already_exists":
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// watch streams events (server-sent events) after the given sequence number,
// waking whenever something is written, with a heartbeat to keep proxies open.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, s, errorf("internal", "streaming unsupported"))
		return
	}
	if r.ContentLength != 0 {
		writeError(w, s, errorf("invalid_argument", "GET /v1/watch takes no request body"))
		return
	}
	bodyRead(w) // the stream is long-lived
	q := r.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	if lastID := r.Header.Get("Last-Event-ID"); lastID != "" {
		after, _ = strconv.ParseInt(lastID, 10, 64)
	}
	f := store.EventFilter{Application: q.Get("app"), Service: q.Get("service"), AfterSeq: after, Limit: 500}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		wake := s.changed.wait()
		evs, err := s.store.ListEvents(r.Context(), f)
		if err != nil {
			return
		}
		for _, e := range evs {
			data, _ := json.Marshal(toAPIEvent(e))
			fmt.Fprintf(w, "id: %d\nevent: event\ndata: %s\n\n", e.Seq, data)
			f.AfterSeq = e.Seq
		}
		if len(evs) > 0 {
			flusher.Flush()
		}
		if len(evs) == f.Limit {
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-heartbeat.C:
			fmt.Fprint(w, ": ping\n\n")
			flusher.Flush()
		}
	}
}
