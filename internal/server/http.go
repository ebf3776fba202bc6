package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine/requests"
	"github.com/drover-dev/drover/internal/store"
)

// defaultMaxBody bounds request bodies (configs carry referenced files).
const defaultMaxBody = 64 << 20

// maxBody is the most a request body may hold.
func (s *Server) maxBody() int64 {
	if s.edgeCfg.MaxBody > 0 {
		return s.edgeCfg.MaxBody
	}
	return defaultMaxBody
}

func (s *Server) routes() {
	s.table = s.routeTable()
	s.mux = s.mount(s.table)
	// The web UI: its page and assets need no credential (the page signs
	// in through the API).
	s.mux.Handle("GET /{$}", s.ui)
	s.mux.Handle("GET /ui/", s.ui)
	s.openRoutes = map[string]bool{}
	for _, rt := range s.table {
		if rt.scope == scopeOpen {
			s.openRoutes[rt.method+" "+rt.path] = true
		}
	}
}

// routeTable is every endpoint of the API (see routes.go).
func (s *Server) routeTable() []route {
	app := func(r *http.Request) string { return r.PathValue("app") }
	svc := func(r *http.Request) string { return r.PathValue("svc") }
	channelAction := func(verb string) http.HandlerFunc {
		return handle(s, func(r *http.Request, req apiv1.ChannelRequest) (any, error) {
			noteAuditChannel(r.Context(), req.ReleaseChannel)
			if err := allow(r.Context(), auth.PermOperate, app(r), req.ReleaseChannel); err != nil {
				return nil, err
			}
			user, err := requestUser(r.Context(), req.User)
			if err != nil {
				return nil, err
			}
			return s.instanceAction(r.Context(), app(r), svc(r), req, func(inst store.Instance) (store.Instance, store.Event, bool, error) {
				now := s.now()
				if verb == "pause" {
					next, ev, changed := requests.Pause(inst, user, now)
					return next, ev, changed, nil
				}
				next, ev, changed := requests.Resume(inst, user, now)
				return next, ev, changed, nil
			})
		})
	}
	return append([]route{
		{method: "GET", path: "/v1/health", scope: scopeOpen, resp: apiv1.Health{}, summary: "Health of the server and its store",
			handler: s.health},
		{method: "GET", path: LivezPath, scope: scopeOpen, summary: "Liveness probe: 200 and ok while the server answers; needs no credential and says nothing more",
			handler: s.livez},
		{method: "GET", path: ReadyzPath, scope: scopeOpen, summary: "Readiness probe: 200 and ok when the store is usable (as /v1/health decides), else 503 and not ok; needs no credential and says nothing more",
			handler: s.readyz},
		{method: "GET", path: "/v1/openapi.json", scope: scopeOpen, summary: "This API's OpenAPI 3 document",
			handler: s.serveOpenAPI},
		{method: "GET", path: "/v1/auth/info", scope: scopeOpen, resp: apiv1.SignInInfo{}, summary: "How people sign in to this server (its OpenID provider, if any)",
			handler: func(w http.ResponseWriter, _ *http.Request) { reply(w, s, s.signInInfo(), nil) }},
		{method: "GET", path: "/v1/auth/login", scope: scopeOpen, query: []queryParam{{"return", "string", "a path on this server to go back to once signed in"}}, summary: "Sign in with a browser: sends it to the OpenID provider (authorization code with PKCE)",
			handler: s.browserLogin},
		{method: "GET", path: "/v1/auth/callback", scope: scopeOpen, query: []queryParam{{"code", "string", "the provider's code"}, {"state", "string", "the sign-in's state"}}, summary: "Where the OpenID provider sends a browser back; sets the session cookie",
			handler: s.browserCallback},
		{method: "POST", path: "/v1/auth/device", scope: scopeOpen, req: apiv1.DeviceSignInRequest{}, resp: apiv1.DeviceSignIn{}, summary: "Start a device sign-in (the CLI's) at the OpenID provider",
			handler: handle(s, func(r *http.Request, _ apiv1.DeviceSignInRequest) (any, error) { return s.startDevice(r.Context()) })},
		{method: "POST", path: "/v1/auth/device/token", scope: scopeOpen, req: apiv1.DeviceTokenRequest{}, resp: apiv1.SignInResult{}, summary: "Poll a device sign-in: pending, or the new session's token (shown once)",
			handler: handle(s, func(r *http.Request, req apiv1.DeviceTokenRequest) (any, error) { return s.pollDevice(r, req) })},
		{method: "POST", path: "/v1/auth/token", scope: scopeOpen, req: apiv1.TokenSignInRequest{}, resp: apiv1.SignInResult{}, summary: "Sign a browser in with an API token (or the local token): sets a session cookie that lasts while the token does",
			handler: func(w http.ResponseWriter, r *http.Request) {
				handle(s, func(r *http.Request, req apiv1.TokenSignInRequest) (any, error) { return s.tokenSignIn(w, r, req) })(w, r)
			}},
		{method: "POST", path: "/v1/auth/logout", scope: scopeOpen, req: apiv1.SignOutRequest{}, resp: apiv1.SignOutResult{}, summary: "End the session the request carries (and clear a browser's cookie)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				handle(s, func(r *http.Request, _ apiv1.SignOutRequest) (any, error) { return s.signOut(w, r) })(w, r)
			}},
		{method: "GET", path: "/v1/whoami", scope: scopeSelf, resp: apiv1.Identity{}, summary: "The identity a request acts under and its roles",
			handler: func(w http.ResponseWriter, r *http.Request) { reply(w, s, whoami(r.Context()), nil) }},
		{method: "POST", path: "/v1/configs:apply", perm: auth.PermConfigure, scope: scopeSome, req: apiv1.ApplyConfigsRequest{}, resp: apiv1.ApplyConfigsResponse{}, summary: "Store configs (each application's need configure on it)",
			handler: handle(s, func(r *http.Request, req apiv1.ApplyConfigsRequest) (any, error) {
				return s.applyConfigs(r.Context(), req)
			})},
		{method: "GET", path: "/v1/configs", perm: auth.PermRead, scope: scopeSome, resp: apiv1.ConfigList{}, query: []queryParam{{"kind", "string", "only configs of this kind (application, service, runtime, ...)"}}, summary: "The latest version of every config (of the applications the caller may read)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listConfigs(r.Context(), r.URL.Query().Get("kind"))
				reply(w, s, out, err)
			}},
		{method: "GET", path: "/v1/services", perm: auth.PermRead, scope: scopeSome, resp: apiv1.ServiceList{}, summary: "Every service's status (of the applications the caller may read)",
			handler: s.serviceList},
		{method: "GET", path: "/v1/services:summary", perm: auth.PermRead, scope: scopeSome, resp: apiv1.ServiceSummaryList{}, summary: "Every service's status in brief (the web UI's list)",
			handler: func(w http.ResponseWriter, r *http.Request) { s.serviceListAs(w, r, true) }},
		{method: "GET", path: "/v1/apps/{app}/services/{svc}", perm: auth.PermRead, scope: scopeApp, resp: apiv1.ServiceStatus{}, summary: "A service's status",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.status(r.Context(), app(r), svc(r))
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/apps/{app}/services/{svc}:push", perm: auth.PermPush, scope: scopeApp, req: apiv1.PushRequest{}, resp: apiv1.PushResponse{}, summary: "Push a new desired state",
			handler: handle(s, func(r *http.Request, req apiv1.PushRequest) (any, error) {
				return s.push(r.Context(), app(r), svc(r), req)
			})},
		{method: "POST", path: "/v1/apps/{app}/releases", perm: auth.PermPush, scope: scopeApp, req: apiv1.ReleaseRequest{}, resp: apiv1.Release{}, summary: "Push several services of the application as one release (dryRun: only the versions and the order it would take)",
			handler: handle(s, func(r *http.Request, req apiv1.ReleaseRequest) (any, error) {
				return s.createRelease(r.Context(), app(r), req)
			})},
		{method: "GET", path: "/v1/apps/{app}/releases", perm: auth.PermRead, scope: scopeApp, resp: apiv1.ReleaseList{}, summary: "The application's releases, newest first",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listReleases(r.Context(), app(r))
				reply(w, s, out, err)
			}},
		{method: "GET", path: "/v1/apps/{app}/releases/{release}", perm: auth.PermRead, scope: scopeApp, resp: apiv1.Release{}, summary: "A release: its status in each release channel, each service's, and its events",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.getRelease(r.Context(), app(r), r.PathValue("release"))
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/apps/{app}/releases/{release}:approve", perm: auth.PermApprove, scope: scopeChannel, req: apiv1.ReleaseApproveRequest{}, resp: apiv1.ReleaseApproveResponse{}, summary: "Approve (or reject) every service of a release waiting for approval in a release channel, one answer per service",
			handler: handle(s, func(r *http.Request, req apiv1.ReleaseApproveRequest) (any, error) {
				noteAuditChannel(r.Context(), req.ReleaseChannel)
				if err := allow(r.Context(), auth.PermApprove, app(r), req.ReleaseChannel); err != nil {
					return nil, err
				}
				return s.approveRelease(r.Context(), app(r), r.PathValue("release"), req)
			})},
		{method: "POST", path: "/v1/apps/{app}/services/{svc}:preview", perm: auth.PermRead, scope: scopeApp, req: apiv1.PushRequest{}, resp: apiv1.PreviewResponse{}, summary: "What a push would do, without pushing",
			handler: handle(s, func(r *http.Request, req apiv1.PushRequest) (any, error) {
				return s.preview(r.Context(), app(r), svc(r), req)
			})},
		{method: "POST", path: "/v1/apps/{app}/services/{svc}:approve", perm: auth.PermApprove, scope: scopeChannel, req: apiv1.ApproveRequest{}, resp: apiv1.ServiceStatus{}, summary: "Approve or reject a release channel's manual approval",
			handler: handle(s, func(r *http.Request, req apiv1.ApproveRequest) (any, error) {
				noteAuditChannel(r.Context(), req.ReleaseChannel)
				if err := allow(r.Context(), auth.PermApprove, app(r), req.ReleaseChannel); err != nil {
					return nil, err
				}
				return s.approve(r.Context(), app(r), svc(r), req)
			})},
		{method: "POST", path: "/v1/apps/{app}/services/{svc}:bypass", perm: auth.PermBypass, scope: scopeChannel, req: apiv1.BypassRequest{}, resp: apiv1.ServiceStatus{}, summary: "Bypass a protection or extension for one version",
			handler: handle(s, func(r *http.Request, req apiv1.BypassRequest) (any, error) {
				noteAuditChannel(r.Context(), req.ReleaseChannel)
				noteAudit(r.Context(), "protection "+req.Protection)
				if err := allow(r.Context(), auth.PermBypass, app(r), req.ReleaseChannel); err != nil {
					return nil, err
				}
				return s.bypass(r.Context(), app(r), svc(r), req)
			})},
		{method: "POST", path: "/v1/apps/{app}/services/{svc}:pause", perm: auth.PermOperate, scope: scopeChannel, req: apiv1.ChannelRequest{}, resp: apiv1.ServiceStatus{}, summary: "Pause a release channel",
			handler: channelAction("pause")},
		{method: "POST", path: "/v1/apps/{app}/services/{svc}:resume", perm: auth.PermOperate, scope: scopeChannel, req: apiv1.ChannelRequest{}, resp: apiv1.ServiceStatus{}, summary: "Resume a paused release channel",
			handler: channelAction("resume")},
		{method: "POST", path: "/v1/apps/{app}/services/{svc}:rollback", perm: auth.PermOperate, scope: scopeChannel, req: apiv1.RollbackRequest{}, resp: apiv1.RollbackResponse{},
			summary: "Roll a release channel (or all) back to its last converged version, or one channel to an earlier pushed version (to: a version id, display name or desired state id; gated like a push)",
			handler: handle(s, func(r *http.Request, req apiv1.RollbackRequest) (any, error) {
				noteAuditChannel(r.Context(), req.ReleaseChannel)
				if err := allow(r.Context(), auth.PermOperate, app(r), req.ReleaseChannel); err != nil {
					return nil, err
				}
				user, err := requestUser(r.Context(), req.User)
				if err != nil {
					return nil, err
				}
				return s.rollback(r.Context(), app(r), svc(r), user, req)
			})},
		{method: "GET", path: "/v1/apps/{app}/services/{svc}/versions", perm: auth.PermRead, scope: scopeApp, resp: apiv1.VersionList{},
			query:   []queryParam{{"limit", "integer", "at most this many (default 20, at most 200)"}},
			summary: "A service's pushed versions, newest first: display names, who pushed them, where they ran (the choices of a rollback)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
				out, err := s.versions(r.Context(), app(r), svc(r), limit)
				reply(w, s, out, err)
			}},
		{method: "GET", path: "/v1/apps/{app}/services/{svc}/parameters", perm: auth.PermRead, scope: scopeApp, resp: apiv1.ParameterList{}, summary: "The parameters a service's pushes take, as its config declares them",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.parameters(r.Context(), app(r), svc(r))
				reply(w, s, out, err)
			}},
		{method: "GET", path: "/v1/apps/{app}/services/{svc}/compiled", perm: auth.PermRead, scope: scopeApp, resp: apiv1.CompiledService{},
			query:   []queryParam{{"desiredStateId", "string", "this desired state of the service (default: the active one)"}, {"releaseChannel", "string", "only this release channel"}},
			summary: "The compiled config a push stored, per release channel (secrets redacted)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				out, err := s.compiled(r.Context(), app(r), svc(r), q.Get("desiredStateId"), q.Get("releaseChannel"))
				reply(w, s, out, err)
			}},
		{method: "GET", path: "/v1/apps/{app}/services/{svc}/events", perm: auth.PermRead, scope: scopeApp, resp: apiv1.EventList{}, query: []queryParam{{"after", "integer", "only events after this sequence number"}, {"limit", "integer", "at most this many events"}, typeParam}, summary: "A service's events",
			handler: func(w http.ResponseWriter, r *http.Request) {
				after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
				limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
				types, err := eventTypes(r.URL.Query())
				if err != nil {
					writeError(w, s, err)
					return
				}
				out, err := s.events(r.Context(), store.EventFilter{Application: app(r), Service: svc(r), AfterSeq: after, Types: types, Limit: limit})
				reply(w, s, out, err)
			}},
		{method: "GET", path: "/v1/apps/{app}/services/{svc}/runs", perm: auth.PermRead, scope: scopeApp, resp: apiv1.RunList{}, query: []queryParam{{"releaseChannel", "string", "only this release channel's runs"}, {"kind", "string", "only runs of this kind"}, {"limit", "integer", "at most this many runs"}}, summary: "A service's task runs (checks, extensions)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				limit, _ := strconv.Atoi(q.Get("limit"))
				out, err := s.runs(r.Context(), store.RunFilter{Application: app(r), Service: svc(r),
					ReleaseChannel: q.Get("releaseChannel"), Kind: q.Get("kind"), Limit: limit})
				reply(w, s, out, err)
			}},
		{method: "GET", path: "/v1/runs/{id}", perm: auth.PermRead, scope: scopeSome, resp: apiv1.Run{}, summary: "One task run with its output (its application must be readable)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
				if err != nil {
					writeError(w, s, errorf(apiv1.CodeInvalidArgument, "run id %q is not a number", r.PathValue("id")))
					return
				}
				out, err := s.run(r.Context(), id)
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/runtimes:link", perm: auth.PermRuntimes, scope: scopeGlobal, req: apiv1.LinkRuntimeRequest{}, resp: apiv1.LinkRuntimeResponse{}, summary: "Link a runtime served by an agent",
			handler: handle(s, func(r *http.Request, req apiv1.LinkRuntimeRequest) (any, error) {
				noteAudit(r.Context(), "runtime "+req.Name)
				return s.linkRuntime(r.Context(), req)
			})},
		{method: "POST", path: "/v1/runtimes/{name}:rotateToken", perm: auth.PermRuntimes, scope: scopeGlobal, req: apiv1.LinkRuntimeRequest{}, resp: apiv1.LinkRuntimeResponse{}, summary: "Replace a linked runtime's join token",
			handler: handle(s, func(r *http.Request, req apiv1.LinkRuntimeRequest) (any, error) {
				return s.rotateRuntimeToken(r.Context(), r.PathValue("name"), req)
			})},
		{method: "POST", path: "/v1/runtimes/{name}:unlink", perm: auth.PermRuntimes, scope: scopeGlobal, req: apiv1.UnlinkRuntimeRequest{}, resp: struct{}{}, summary: "Unlink a runtime",
			handler: handle(s, func(r *http.Request, _ apiv1.UnlinkRuntimeRequest) (any, error) {
				return s.unlinkRuntime(r.Context(), r.PathValue("name"))
			})},
		{method: "GET", path: "/v1/runtimes", perm: auth.PermRead, scope: scopeSome, resp: apiv1.RuntimeList{}, summary: "Runtimes and their agents",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listRuntimes(r.Context())
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/freezes", perm: auth.PermFreeze, scope: scopeSome, req: apiv1.FreezeRequest{}, resp: apiv1.Freeze{}, summary: "Freeze deployments (of an application: freeze on it; of everything: on every application)",
			handler: handle(s, func(r *http.Request, req apiv1.FreezeRequest) (any, error) {
				return s.freeze(r.Context(), req)
			})},
		{method: "POST", path: "/v1/freezes:lift", perm: auth.PermFreeze, scope: scopeSome, req: apiv1.UnfreezeRequest{}, resp: apiv1.FreezeList{}, summary: "Lift freezes",
			handler: handle(s, func(r *http.Request, req apiv1.UnfreezeRequest) (any, error) {
				if req.ID != "" {
					noteAudit(r.Context(), "freeze "+req.ID)
				} else {
					noteAudit(r.Context(), "freeze of "+freezeScope(ds.Freeze{Application: req.Application, ReleaseChannel: req.ReleaseChannel}))
				}
				return s.unfreeze(r.Context(), req)
			})},
		{method: "GET", path: "/v1/freezes", perm: auth.PermRead, scope: scopeSome, resp: apiv1.FreezeList{}, query: []queryParam{{"all", "boolean", "ended freezes too"}}, summary: "Freezes in force (all=true: ended ones too)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listFreezes(r.Context(), r.URL.Query().Get("all") == "true")
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/tokens", perm: auth.PermTokens, scope: scopeGlobal, req: apiv1.CreateTokenRequest{}, resp: apiv1.CreateTokenResponse{}, summary: "Create an API token (shown once)",
			handler: handle(s, func(r *http.Request, req apiv1.CreateTokenRequest) (any, error) {
				return s.createToken(r.Context(), req)
			})},
		{method: "GET", path: "/v1/sessions", perm: auth.PermTokens, scope: scopeGlobal, resp: apiv1.SessionList{}, summary: "People's sessions (never their secrets)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listSessions(r.Context())
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/sessions:revoke", perm: auth.PermTokens, scope: scopeGlobal, req: apiv1.RevokeSessionsRequest{}, resp: apiv1.RevokeSessionsResult{}, summary: "End a session, or every session of a person",
			handler: handle(s, func(r *http.Request, req apiv1.RevokeSessionsRequest) (any, error) {
				return s.revokeSessions(r.Context(), req)
			})},
		{method: "GET", path: "/v1/tokens", perm: auth.PermTokens, scope: scopeGlobal, resp: apiv1.TokenList{}, summary: "API tokens (never their values)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listTokens(r.Context())
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/tokens/{name}:revoke", perm: auth.PermTokens, scope: scopeGlobal, req: apiv1.RevokeTokenRequest{}, resp: apiv1.TokenInfo{}, summary: "Revoke an API token",
			handler: handle(s, func(r *http.Request, _ apiv1.RevokeTokenRequest) (any, error) {
				return s.revokeToken(r.Context(), r.PathValue("name"))
			})},
		{method: "GET", path: "/v1/secrets", perm: auth.PermRead, scope: scopeGlobal, resp: apiv1.SecretList{}, summary: "The secrets drover keeps: keys, versions, who set them and when (never values)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				out, err := s.listSecrets(r.Context())
				reply(w, s, out, err)
			}},
		{method: "POST", path: "/v1/secrets/{key}:set", perm: auth.PermSecrets, scope: scopeGlobal, req: apiv1.SetSecretRequest{}, resp: apiv1.SecretVersion{}, summary: "Make a new version of a secret (KEY-0, KEY-1, ...); the value is sealed and never shown",
			handler: handle(s, func(r *http.Request, req apiv1.SetSecretRequest) (any, error) {
				return s.setSecret(r.Context(), r.PathValue("key"), req)
			})},
		{method: "POST", path: "/v1/secrets/{key}:delete", perm: auth.PermSecrets, scope: scopeGlobal, req: apiv1.DeleteSecretRequest{}, resp: apiv1.DeleteSecretResponse{}, summary: "Delete a secret: every version, or one",
			handler: handle(s, func(r *http.Request, req apiv1.DeleteSecretRequest) (any, error) {
				return s.deleteSecret(r.Context(), r.PathValue("key"), req)
			})},
		{method: "GET", path: "/v1/audit", perm: auth.PermAudit, scope: scopeSome, resp: apiv1.AuditList{}, query: []queryParam{{"app", "string", "only this application's records"}, {"identity", "string", "only this identity's records"}, {"since", "string", "only records at or after this RFC 3339 time"}, {"after", "integer", "only records after this sequence number (a page's next)"}, {"limit", "integer", "at most this many records (1 to 5000; default 500)"}}, summary: "The audit log (of the applications the caller audits)",
			handler: s.listAudit},
		{method: "GET", path: "/metrics", perm: auth.PermRead, scope: scopeGlobal, summary: "Metrics in Prometheus's format (docs/metrics.md)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if s.edgeCfg.Metrics == nil {
					writeError(w, s, errorf(apiv1.CodeNotFound, "this server keeps no metrics"))
					return
				}
				s.edgeCfg.Metrics.Handler().ServeHTTP(w, r)
			}},
		{method: "GET", path: "/v1/watch", perm: auth.PermRead, scope: scopeSome, query: []queryParam{{"app", "string", "only this application's events"}, {"service", "string", "only this service's events"}, {"after", "integer", "only events after this sequence number (or the Last-Event-ID header)"}, typeParam}, summary: "Server-sent events (of the applications the caller may read)",
			handler: s.watch},
	}, s.notificationRoutes()...)
}

// serviceList streams the status of every service the caller may read.
func (s *Server) serviceList(w http.ResponseWriter, r *http.Request) { s.serviceListAs(w, r, false) }

// serviceListAs writes every service's status, or its summary.
func (s *Server) serviceListAs(w http.ResponseWriter, r *http.Request, summary bool) {
	lw := &serviceListWriter{w: w, summary: summary}
	if err := s.listServicesAs(r.Context(), summary, lw.add); err != nil {
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
		body := http.MaxBytesReader(w, r.Body, s.maxBody())
		dec := json.NewDecoder(body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, s, bodyError(err))
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
	summary bool // write apiv1.ServiceSummary values
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
	if l.summary {
		sum := apiv1.ServiceSummary{Application: st.Application, Service: st.Service, Status: st.Status, DesiredVersion: st.DesiredVersion,
			Channels: len(st.ReleaseChannels), DisplayName: st.DisplayName}
		for _, c := range st.ReleaseChannels {
			if c.Status == string(ds.StatusConverged) {
				sum.Converged++
			}
		}
		l.err = l.enc.Encode(sum)
		return l.err
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
	body := apiv1.Error{Code: apiv1.CodeInternal, Message: err.Error()}
	code := http.StatusInternalServerError
	var ae *apiError
	var ve *validationError
	switch {
	case errors.As(err, &ve):
		body.Code, body.Message, body.Details = apiv1.CodeInvalidArgument, "invalid configs", ve.details
		code = http.StatusBadRequest
	case errors.As(err, &ae):
		body.Code = ae.code
		code = ae.code.HTTPStatus()
	case errors.Is(err, store.ErrNotFound):
		body.Code, code = apiv1.CodeNotFound, http.StatusNotFound
	case errors.Is(err, store.ErrConflict):
		body.Code, code = apiv1.CodeConflict, http.StatusConflict
	case errors.Is(err, store.ErrDuplicate):
		body.Code, code = apiv1.CodeAlreadyExists, http.StatusConflict
	}
	if code == http.StatusInternalServerError {
		// An unexpected failure is often the store's: a removed data
		// directory, a full disk, a lost database connection. Its check
		// names the cause the failed read or write could not.
		if cerr := s.storeCause(); cerr != nil && !strings.Contains(body.Message, rootCause(cerr).Error()) {
			body.Message += "; " + cerr.Error()
		}
		s.log.Error("request failed", "error", err)
	}
	writeJSON(w, code, apiv1.ErrorResponse{Error: body})
}

// watch streams events (server-sent events) after the given sequence number,
// waking whenever something is written, with a heartbeat to keep proxies open.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, s, errorf(apiv1.CodeInternal, "streaming unsupported"))
		return
	}
	if r.ContentLength != 0 {
		writeError(w, s, errorf(apiv1.CodeInvalidArgument, "GET /v1/watch takes no request body"))
		return
	}
	bodyRead(w) // the stream is long-lived
	id, _ := auth.FromContext(r.Context())
	done, err := s.limits.openStream(id)
	if err != nil {
		writeError(w, s, err)
		return
	}
	defer done()
	rc := http.NewResponseController(w)
	// The credential is checked again now and then: a token revoked (or
	// expired) while its stream is open ends the stream.
	authn, checked := s.edgeCfg.Auth, time.Now()
	stillValid := func() bool {
		// The local token itself cannot be revoked; a session made from
		// it can, and is checked again as every other credential.
		if authn == nil || id.Kind == auth.KindLocal && id.Session == 0 || time.Since(checked) < s.streamRecheck {
			return true
		}
		checked = time.Now()
		_, err := authn.Authenticate(r)
		return err == nil
	}
	q := r.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	if lastID := r.Header.Get("Last-Event-ID"); lastID != "" {
		after, _ = strconv.ParseInt(lastID, 10, 64)
	}
	types, err := eventTypes(q)
	if err != nil {
		writeError(w, s, err)
		return
	}
	f := store.EventFilter{Application: q.Get("app"), Service: q.Get("service"), AfterSeq: after, Types: types, Limit: 500}
	if f.Application != "" && !visible(r.Context(), f.Application) {
		writeError(w, s, allow(r.Context(), auth.PermRead, f.Application, ""))
		return
	}
	// The stream carries the events of the applications the caller may
	// read (decided once per application: the identity is the stream's).
	readable := map[string]bool{}
	shown := func(app string) bool {
		ok, known := readable[app]
		if !known {
			ok = visible(r.Context(), app)
			readable[app] = ok
		}
		return ok
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	var read time.Time
	for {
		wake := s.changed.wait()
		if !stillValid() {
			return
		}
		read = time.Now()
		// With a type filter, the stream moves past the events of other
		// types up to the newest one, rather than reading them again at
		// every wake.
		var last int64
		if len(f.Types) > 0 {
			if last, err = s.store.LastEventSeq(r.Context()); err != nil {
				return
			}
		}
		evs, err := s.store.ListEvents(r.Context(), f)
		if err != nil {
			return
		}
		if len(evs) > 0 {
			// A client that does not read loses its stream.
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		}
		for _, e := range evs {
			if !shown(e.Application) {
				f.AfterSeq = e.Seq
				continue
			}
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
		f.AfterSeq = max(f.AfterSeq, last)
		select {
		case <-r.Context().Done():
			return
		case <-wake:
			// Writes come in bursts (a busy engine commits hundreds of
			// times a second): the stream reads the store at most once
			// per streamBatch, taking what a burst wrote in one read.
			if d := streamBatch - time.Since(read); d > 0 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(d):
				}
			}
		case <-heartbeat.C:
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// typeParam is the query parameter of the event routes that keeps only
// some types of events.
var typeParam = queryParam{"type", "string", "only events of these types (comma-separated, or the parameter repeated)"}

// eventTypes reads the type parameters of an events request.
func eventTypes(q url.Values) ([]ds.EventType, error) {
	var out []ds.EventType
	for _, v := range q["type"] {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if !slices.Contains(ds.EventTypes(), ds.EventType(t)) {
				known := make([]string, 0, len(ds.EventTypes()))
				for _, k := range ds.EventTypes() {
					known = append(known, string(k))
				}
				return nil, errorf(apiv1.CodeInvalidArgument, "unknown event type %q: one of %s", t, strings.Join(known, ", "))
			}
			if !slices.Contains(out, ds.EventType(t)) {
				out = append(out, ds.EventType(t))
			}
		}
	}
	return out, nil
}

// rootCause is the innermost error of err's chain.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
