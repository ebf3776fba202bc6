package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
)

// The route table: every endpoint of the API, with the permission it needs
// and where that permission must hold. One wrapper (authorize) checks it
// before any handler runs; a route whose scope is only known from its body
// (a release channel, the applications of a set of configs) checks the rest
// in its handler with s.allow, and a list filters what it returns with
// s.visible. A route without a permission does not build: TestRouteTable
// fails, and the authorization matrix test is generated from this table.

// scope says where a route's permission must hold.
type scope int

const (
	// scopeApp: on the application of the path ({app}), every channel.
	scopeApp scope = iota + 1
	// scopeChannel: on some release channel of the path's application; the
	// handler checks the channel the body names (s.allow).
	scopeChannel
	// scopeSome: somewhere; the handler checks the scope its body or the
	// record it reads names, or filters the list it returns.
	scopeSome
	// scopeGlobal: on every application (runtimes, tokens).
	scopeGlobal
	// scopeOpen: no credential needed (the health probe).
	scopeOpen
	// scopeSelf: any authenticated identity (who am I).
	scopeSelf
)

func (sc scope) String() string {
	switch sc {
	case scopeApp:
		return "application"
	case scopeChannel:
		return "release channel"
	case scopeSome:
		return "some application"
	case scopeGlobal:
		return "every application"
	case scopeOpen:
		return "open"
	case scopeSelf:
		return "self"
	}
	return "unknown"
}

// route is one endpoint.
type route struct {
	// method and path as clients send them; a verb after the last
	// wildcard ("/v1/apps/{app}/services/{svc}:push") is dispatched by
	// the server, as the mux cannot match it.
	method, path string
	perm         auth.Permission
	scope        scope
	summary      string
	handler      http.HandlerFunc
	// req and resp are zero values of the JSON request body and answer
	// (nil: none, or not JSON), query the query parameters: they make
	// the OpenAPI document (openapi.go).
	req, resp any
	query     []queryParam
}

// queryParam is a query parameter of a route: name, OpenAPI type and what
// it does.
type queryParam struct{ name, typ, doc string }

// mutates reports whether the route changes anything (rate limited).
func (rt route) mutates() bool { return rt.method != http.MethodGet }

// audited reports whether each request is recorded in the audit log by
// the route's wrapper: every change an identity asks. The open routes
// that change something (the device sign-in's) record the sign-ins
// themselves, not each poll.
func (rt route) audited() bool { return rt.mutates() && rt.scope != scopeOpen }

// splitVerb splits "/v1/runtimes/{name}:unlink" into the mux pattern's path
// and the verb; paths whose colon is not after a wildcard have no verb.
func splitVerb(path string) (base, wildcard, verb string) {
	i := strings.LastIndex(path, "}:")
	if i < 0 {
		return path, "", ""
	}
	open := strings.LastIndex(path[:i], "{")
	return path[:i+1], path[open+1 : i], path[i+2:]
}

// mount registers the routes on a new mux, each behind authorize.
func (s *Server) mount(routes []route) *http.ServeMux {
	m := http.NewServeMux()
	verbs := map[string]map[string]http.HandlerFunc{} // pattern -> verb -> handler
	wildcards := map[string]string{}
	var order []string
	for _, rt := range routes {
		h := s.authorize(rt)
		base, wildcard, verb := splitVerb(rt.path)
		if verb == "" {
			m.HandleFunc(rt.method+" "+base, h)
			continue
		}
		pattern := rt.method + " " + base
		if verbs[pattern] == nil {
			verbs[pattern] = map[string]http.HandlerFunc{}
			wildcards[pattern] = wildcard
			order = append(order, pattern)
		}
		verbs[pattern][verb] = h
	}
	for _, pattern := range order {
		byVerb, wildcard := verbs[pattern], wildcards[pattern]
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			name, verb, ok := cutLast(r.PathValue(wildcard), ":")
			h := byVerb[verb]
			if !ok || h == nil {
				writeError(w, s, errorf(apiv1.CodeNotFound, "unknown endpoint %s %s", r.Method, r.URL.Path))
				return
			}
			r.SetPathValue(wildcard, name)
			h(w, r)
		})
	}
	return m
}

// authorize returns rt's handler behind the check of its permission, and
// for a mutating route, the audit record of every request (audited); each
// request is counted in the metrics.
func (s *Server) authorize(rt route) http.HandlerFunc {
	check := s.check(rt)
	h := check
	if rt.audited() {
		h = func(w http.ResponseWriter, r *http.Request) { s.audited(rt, w, r, check) }
	}
	m := s.edgeCfg.Metrics
	if m == nil {
		return h
	}
	name := rt.method + " " + rt.path
	stream := rt.path == "/v1/watch"
	return func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		d := time.Since(began)
		if stream {
			d = -1
		}
		m.Request(name, sw.code(), d)
	}
}

// statusWriter notes the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets event streams through.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection (read deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// check returns rt's handler behind the check of its permission.
func (s *Server) check(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rt.scope == scopeOpen {
			// Anyone may send these: each source address is limited as
			// an identity's changes are (the sign-in routes' GETs too, as
			// each may ask the provider or write the audit log).
			if rt.mutates() || strings.HasPrefix(rt.path, "/v1/auth/") && rt.path != "/v1/auth/info" {
				if ok, retry := s.limits.mutation(auth.Identity{Name: "source " + sourceHost(r), Kind: "address"}); !ok {
					tooMany(w, s, auth.Identity{Name: sourceHost(r)}, retry)
					return
				}
			}
			rt.handler(w, r)
			return
		}
		id, ok := auth.FromContext(r.Context())
		if !ok {
			// The edge lets no such request through; fail closed all the same.
			writeError(w, s, errorf(apiv1.CodeUnauthenticated, "this request carries no credential"))
			return
		}
		var allowed bool
		app := r.PathValue("app")
		switch rt.scope {
		case scopeApp:
			// Reading an application needs a role on some part of it.
			allowed = id.Can(rt.perm, app, "") || rt.perm == auth.PermRead && id.CanSome(rt.perm, app)
		case scopeChannel:
			allowed = id.CanSome(rt.perm, app)
		case scopeSome:
			allowed = id.CanAny(rt.perm)
		case scopeGlobal:
			allowed = id.Can(rt.perm, "", "")
		case scopeSelf, scopeOpen:
			allowed = true
		}
		// Every change asked counts, allowed or not: refusals are audited
		// too, and must not flood the log.
		if rt.mutates() {
			if ok, retry := s.limits.mutation(id); !ok {
				tooMany(w, s, id, retry)
				return
			}
		}
		if !allowed {
			where := ""
			switch rt.scope {
			case scopeApp, scopeChannel:
				where = "application " + app
			case scopeGlobal:
				where = "every application"
			case scopeSome, scopeOpen, scopeSelf:
			}
			writeError(w, s, denied(id, rt.perm, where))
			return
		}
		rt.handler(w, r)
	}
}

// denied is the error of a request id may not make: it names the missing
// permission, where it was needed, and the roles that grant it.
func denied(id auth.Identity, p auth.Permission, where string) error {
	var roles []string
	for _, r := range auth.Roles {
		for _, g := range r.Grants() {
			if g == p {
				roles = append(roles, string(r))
			}
		}
	}
	msg := fmt.Sprintf("%s lacks permission %q", id.Name, p)
	if where != "" {
		msg += " on " + where
	}
	return errorf(apiv1.CodePermissionDenied, "%s (granted by the roles %s); ask an admin for one", msg, strings.Join(roles, ", "))
}

// allow checks, in a handler, that the request's identity may do p on
// release channel rc of app (rc "" = the whole application; app "" =
// every application).
func allow(ctx context.Context, p auth.Permission, app, rc string) error {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return errorf(apiv1.CodeUnauthenticated, "this request carries no credential")
	}
	if id.Can(p, app, rc) {
		return nil
	}
	switch {
	case app == "":
		return denied(id, p, "every application")
	case rc == "":
		return denied(id, p, "application "+app)
	}
	return denied(id, p, fmt.Sprintf("release channel %s of application %s", rc, app))
}

// visible reports whether the request's identity may read application
// app's records (app "": records of no application, which every reader
// sees).
func visible(ctx context.Context, app string) bool {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return false
	}
	if app == "" {
		return id.CanAny(auth.PermRead)
	}
	return id.CanSome(auth.PermRead, app)
}

// actor is the name of the identity a request acts under.
func actor(ctx context.Context) string {
	id, _ := auth.FromContext(ctx)
	return id.Name
}

// whoami is the identity a request acts under.
func whoami(ctx context.Context) *apiv1.Identity {
	id, _ := auth.FromContext(ctx)
	out := &apiv1.Identity{Name: id.Name, Kind: id.Kind, Roles: []string{}}
	for _, b := range id.Bindings {
		out.Roles = append(out.Roles, b.String())
	}
	return out
}

// sourceHost is the address part of r's remote address.
func sourceHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
