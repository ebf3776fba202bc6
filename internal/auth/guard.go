package auth

import (
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// Error codes of refused requests (the "code" of the JSON error body).
const (
	CodeUnauthenticated      = apiv1.CodeUnauthenticated      // 401
	CodePermissionDenied     = apiv1.CodePermissionDenied     // 403
	CodeUnsupportedMediaType = apiv1.CodeUnsupportedMediaType // 415
)

// credentialHint says how a client gets a credential; it ends every 401.
const credentialHint = "the drover CLI finds the token of a server started by the same OS user by itself; " +
	"otherwise sign in with drover login SERVER, pass --token or set DROVER_TOKEN to an API token (drover tokens create) " +
	"or to the content of the file token in the server's data directory " +
	"(HTTP clients send it as Authorization: Bearer TOKEN)"

// Guard lets a request reach the API only if, in this order, its Host names
// this server, its Origin (when present) is this server, a mutating request
// is application/json, and it carries a credential the Authenticator accepts.
type Guard struct {
	Hosts         Hosts
	Authenticator Authenticator
	// Open reports whether a request may go without a credential (a health
	// probe); Host and Origin are checked all the same. Nil: none.
	Open func(*http.Request) bool
	// CrossSite reports whether a request may come from another site (a
	// browser sent back by an OpenID provider); such requests must not
	// change anything. Nil: none.
	CrossSite func(*http.Request) bool
	// Form reports whether a request may send a form-encoded body rather
	// than JSON (Slack's button clicks, which their handler authenticates
	// by Slack's signature).
	Form func(*http.Request) bool
	// Log receives refusals; nil discards them.
	Log *slog.Logger
	// OnRefuse is told of every request the guard refuses (nil: none),
	// with the status, code and message it answers: the server audits the
	// refused changes.
	OnRefuse func(r *http.Request, status int, code apiv1.ErrorCode, msg string)
}

// Wrap returns next behind the guard. The identity of an authenticated
// request is in its context (FromContext).
func (g *Guard) Wrap(next http.Handler) http.Handler {
	log := g.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(status int, code apiv1.ErrorCode, reason, msg string) {
			// A request without any credential is what a browser sends
			// before its user signs in (one per API call of the web UI's
			// page): routine, so debug. The others say something is wrong.
			level := slog.LevelWarn
			if reason == "no_credential" {
				level = slog.LevelDebug
			}
			log.Log(r.Context(), level, "request refused", "reason", reason, "method", r.Method, "path", r.URL.Path,
				"host", r.Host, "origin", r.Header.Get("Origin"), "remote_addr", r.RemoteAddr)
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="drover"`)
			}
			writeError(w, status, code, msg)
			if g.OnRefuse != nil {
				g.OnRefuse(r, status, code, msg)
			}
		}
		if !g.Hosts.Allowed(r.Host) {
			refuse(http.StatusForbidden, CodePermissionDenied, "host",
				"host "+quote(r.Host)+" does not name this server: use the address it listens on, or start it with --public-name")
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !g.sameOrigin(origin) {
			refuse(http.StatusForbidden, CodePermissionDenied, "origin",
				"cross-origin requests are refused: origin "+quote(origin)+" is not this server")
			return
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" && (g.CrossSite == nil || mutating(r.Method) || !g.CrossSite(r)) {
			refuse(http.StatusForbidden, CodePermissionDenied, "sec_fetch_site", "cross-site requests are refused")
			return
		}
		if mutating(r.Method) && !isJSON(r.Header.Get("Content-Type")) && (g.Form == nil || !g.Form(r) || !isForm(r.Header.Get("Content-Type"))) {
			refuse(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "content_type",
				"content type "+quote(r.Header.Get("Content-Type"))+" is not accepted: send the body as Content-Type: application/json")
			return
		}
		id, err := g.authenticate(r)
		switch {
		case err == nil:
			r = r.WithContext(WithIdentity(r.Context(), id))
		case errors.Is(err, ErrNoCredential) && g.Open != nil && g.Open(r):
		case errors.Is(err, ErrNoCredential):
			refuse(http.StatusUnauthorized, CodeUnauthenticated, "no_credential", "this request carries no credential: "+credentialHint)
			return
		case errors.Is(err, ErrBadCredential) && errors.Unwrap(err) != nil:
			// A known credential refused for a reason (revoked, expired).
			refuse(http.StatusUnauthorized, CodeUnauthenticated, "bad_credential", err.Error())
			return
		case errors.Is(err, ErrBadCredential):
			refuse(http.StatusUnauthorized, CodeUnauthenticated, "bad_credential",
				"the credential is not valid for this server (was its data directory replaced, or the token revoked?): "+credentialHint)
			return
		default:
			// The credential could not be checked (the store failed).
			log.Error("authentication failed", "error", err, "method", r.Method, "path", r.URL.Path)
			writeError(w, http.StatusServiceUnavailable, apiv1.CodeUnavailable, "the credential could not be checked; try again")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Guard) authenticate(r *http.Request) (Identity, error) {
	if g.Authenticator == nil {
		return Identity{}, ErrNoCredential // fail closed
	}
	return g.Authenticator.Authenticate(r)
}

// sameOrigin reports whether an Origin header value is this server.
func (g *Guard) sameOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	if u.Port() == "" && u.Scheme == "https" {
		// https://name: allowed only as a bare public name (a proxy on 443).
		return g.Hosts.names[strings.ToLower(u.Host)]
	}
	return g.Hosts.Allowed(u.Host)
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func isForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// quote bounds and quotes a header value for a message.
func quote(s string) string {
	const limit = 200
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func writeError(w http.ResponseWriter, status int, code apiv1.ErrorCode, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(apiv1.ErrorResponse{Error: apiv1.Error{Code: code, Message: msg}})
}
