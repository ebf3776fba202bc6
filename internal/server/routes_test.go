package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
)

// TestRouteTable: every route but the open ones and whoami declares a known
// permission and a scope, and no two routes share a method and path.
func TestRouteTable(t *testing.T) {
	s, _ := newPushedServer(t)
	seen := map[string]bool{}
	for _, rt := range s.table {
		key := rt.method + " " + rt.path
		if seen[key] {
			t.Errorf("%s: declared twice", key)
		}
		seen[key] = true
		switch {
		case rt.handler == nil:
			t.Errorf("%s: no handler", key)
		case rt.summary == "":
			t.Errorf("%s: no summary", key)
		case rt.scope == scopeOpen || rt.scope == scopeSelf:
			if rt.perm != "" {
				t.Errorf("%s: a %s route needs no permission, but declares %q", key, rt.scope, rt.perm)
			}
		case !slices.Contains(auth.Permissions, rt.perm):
			t.Errorf("%s: permission %q is not one of auth.Permissions", key, rt.perm)
		case rt.scope == 0:
			t.Errorf("%s: no scope", key)
		}
	}
}

// matrixBodies are the request bodies of the authorization matrix, by
// route; a mutating route missing here fails the matrix, so a new route
// gets one.
func matrixBodies(t *testing.T, ds string) map[string]any {
	qs := quickstartConfigs(t)
	var appConfigs apiv1.ApplyConfigsRequest
	for _, c := range qs.Configs {
		if !bytes.Contains(c.Body, []byte(`"runtime":{`)) || bytes.Contains(c.Body, []byte(`"application":`)) {
			appConfigs.Configs = append(appConfigs.Configs, c)
		}
	}
	return map[string]any{
		"POST /v1/configs:apply":                         appConfigs,
		"POST /v1/apps/{app}/services/{svc}:push":        apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.27"}}},
		"POST /v1/apps/{app}/services/{svc}:preview":     apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.28"}}},
		"POST /v1/apps/{app}/releases":                   apiv1.ReleaseRequest{Services: []apiv1.ReleaseServiceRequest{{Service: "web", Params: []apiv1.Param{{Name: "image", Value: "1.29"}}}}},
		"POST /v1/apps/{app}/releases/{release}:approve": apiv1.ReleaseApproveRequest{ReleaseChannel: "prod"},
		"POST /v1/apps/{app}/services/{svc}:approve":     apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds},
		"POST /v1/apps/{app}/services/{svc}:bypass":      apiv1.BypassRequest{ReleaseChannel: "prod", DesiredStateID: ds, Protection: "none"},
		"POST /v1/apps/{app}/services/{svc}:pause":       apiv1.ChannelRequest{ReleaseChannel: "prod"},
		"POST /v1/apps/{app}/services/{svc}:resume":      apiv1.ChannelRequest{ReleaseChannel: "prod"},
		"POST /v1/apps/{app}/services/{svc}:rollback":    apiv1.RollbackRequest{ReleaseChannel: "prod"},
		"POST /v1/runtimes:link":                         apiv1.LinkRuntimeRequest{Name: "matrix"},
		"POST /v1/runtimes/{name}:rotateToken":           apiv1.LinkRuntimeRequest{},
		"POST /v1/runtimes/{name}:unlink":                apiv1.LinkRuntimeRequest{},
		"POST /v1/freezes":                               apiv1.FreezeRequest{Application: "quickstart", Reason: "matrix", Until: time.Now().Add(time.Second)},
		"POST /v1/tokens":                                apiv1.CreateTokenRequest{Name: "matrix", Roles: []string{"viewer"}},
		"POST /v1/tokens/{name}:revoke":                  apiv1.RevokeTokenRequest{},
		"POST /v1/freezes:lift":                          apiv1.UnfreezeRequest{Application: "quickstart"},
		"POST /v1/auth/device":                           apiv1.DeviceSignInRequest{},
		"POST /v1/auth/device/token":                     apiv1.DeviceTokenRequest{DeviceCode: "matrix"},
		"POST /v1/slack/interactions":                    "payload=%7B%7D",
		"POST /v1/auth/logout":                           apiv1.SignOutRequest{},
		"POST /v1/auth/token":                            apiv1.TokenSignInRequest{Token: "drover_matrix-not-a-token"},
		"POST /v1/sessions:revoke":                       apiv1.RevokeSessionsRequest{Identity: "nobody"},
		"POST /v1/secrets/{key}:set":                     apiv1.SetSecretRequest{Value: "matrix-value"},
		"POST /v1/secrets/{key}:delete":                  apiv1.DeleteSecretRequest{},
		"POST /v1/notifications/{name}:set":              apiv1.PutNotificationTargetRequest{URL: "http://127.0.0.1:1/hook", Secret: "matrix-secret-0123456789"},
		"POST /v1/notifications/{name}:delete":           apiv1.DeleteNotificationTargetRequest{},
		"POST /v1/notifications:retry":                   apiv1.RetryDeliveriesRequest{},
	}
}

// roleMeaning is what each role may do, as docs/access.md says: written
// out here, not read from package auth, so the matrix checks it.
var roleMeaning = map[auth.Role][]auth.Permission{
	auth.RoleViewer:   {auth.PermRead},
	auth.RoleDeployer: {auth.PermRead, auth.PermPush, auth.PermOperate, auth.PermSecrets},
	auth.RoleApprover: {auth.PermRead, auth.PermApprove},
	auth.RoleAdmin: {auth.PermRead, auth.PermPush, auth.PermOperate, auth.PermApprove, auth.PermBypass, auth.PermFreeze,
		auth.PermConfigure, auth.PermRuntimes, auth.PermTokens, auth.PermAudit, auth.PermSecrets},
}

// matrixExpect is whether binding b may make a request of rt in the
// matrix (on application quickstart, release channel prod), from the
// roles' documented meaning rather than from the code that checks them.
func matrixExpect(rt route, b auth.Binding) bool {
	if rt.scope == scopeOpen || rt.scope == scopeSelf {
		return true
	}
	if !slices.Contains(roleMeaning[b.Role], rt.perm) {
		return false
	}
	everywhere := b.Application == ""
	onApp := everywhere || b.Application == "quickstart"
	onProd := onApp && (b.ReleaseChannel == "" || b.ReleaseChannel == "prod")
	switch {
	case rt.scope == scopeGlobal:
		return everywhere
	case !rt.mutates() && rt.scope == scopeSome:
		return true // a list: filtered to what b may see
	case rt.perm == auth.PermRead:
		return onApp
	case rt.scope == scopeChannel:
		return onProd
	}
	return onApp && b.ReleaseChannel == "" // the whole application
}

// TestAuthorizationMatrix sends every route of the table as every role,
// over every application, over quickstart, over another application and
// over one release channel: a request is refused with 403 naming the
// permission exactly when the role does not grant it there.
func TestAuthorizationMatrix(t *testing.T) {
	s, ds := newPushedServer(t)
	bodies := matrixBodies(t, ds)
	var bindings []auth.Binding
	for _, r := range auth.Roles {
		bindings = append(bindings, auth.Binding{Role: r}, auth.Binding{Role: r, Application: "quickstart"},
			auth.Binding{Role: r, Application: "other"}, auth.Binding{Role: r, Application: "quickstart", ReleaseChannel: "prod"},
			auth.Binding{Role: r, Application: "quickstart", ReleaseChannel: "staging"})
	}
	path := strings.NewReplacer("{app}", "quickstart", "{svc}", "web", "{name}", "matrix", "{key}", "matrix", "{id}", "1")
	for _, rt := range s.table {
		key := rt.method + " " + rt.path
		body, ok := bodies[key]
		if rt.mutates() && !ok {
			t.Errorf("%s: no request body in matrixBodies", key)
			continue
		}
		for i, b := range bindings {
			ctx, cancel := context.WithTimeout(as(t.Context(), fmt.Sprintf("matrix-%d", i), b), 2*time.Second)
			var rd *bytes.Reader
			if rt.mutates() {
				raw, err := json.Marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				rd = bytes.NewReader(raw)
			} else {
				rd = bytes.NewReader(nil)
			}
			if rt.path == "/v1/watch" {
				// A stream: its first answer is all the matrix needs.
				c2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel2()
				ctx = c2
			}
			req := httptest.NewRequestWithContext(ctx, rt.method, path.Replace(rt.path), rd)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			cancel()
			want := matrixExpect(rt, b)
			got := rec.Code != http.StatusForbidden && rec.Code != http.StatusUnauthorized
			switch {
			case want && !got:
				t.Errorf("%s as %s: %d %s; want it allowed", key, b, rec.Code, rec.Body)
			case !want && got:
				t.Errorf("%s as %s: %d %s; want 403", key, b, rec.Code, rec.Body)
			case !want && !strings.Contains(errorMessage(rec.Body.Bytes()), fmt.Sprintf("permission %q", rt.perm)):
				t.Errorf("%s as %s: %d %s; want the missing permission %q named", key, b, rec.Code, rec.Body, rt.perm)
			}
		}
	}
}

// errorMessage is the message of an API error body.
func errorMessage(body []byte) string {
	var e apiv1.ErrorResponse
	_ = json.Unmarshal(body, &e)
	return e.Error.Message
}

// TestListsShowWhatTheCallerMayRead: the service list, the config list and
// the event stream carry only the applications the caller holds a role on.
func TestListsShowWhatTheCallerMayRead(t *testing.T) {
	s, _ := newPushedServer(t)
	get := func(ctx context.Context, path string) string {
		t.Helper()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	mine := as(t.Context(), "mine", auth.Binding{Role: auth.RoleViewer, Application: "quickstart", ReleaseChannel: "prod"})
	other := as(t.Context(), "other", auth.Binding{Role: auth.RoleViewer, Application: "other"})
	if body := get(mine, "/v1/services"); !strings.Contains(body, `"service":"web"`) {
		t.Errorf("services as a viewer of quickstart/prod: %s", body)
	}
	if body := get(other, "/v1/services"); body != "{\"services\":[]}\n" {
		t.Errorf("services as a viewer of another application: %s", body)
	}
	if body := get(other, "/v1/configs"); strings.Contains(body, "quickstart") || !strings.Contains(body, `"kind":"runtime"`) {
		t.Errorf("configs as a viewer of another application: %s (want the runtimes, not quickstart's)", body)
	}
	stream := func(ctx context.Context) string {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		return get(ctx, "/v1/watch")
	}
	if body := stream(mine); !strings.Contains(body, `"type":"pushed"`) {
		t.Errorf("event stream as a viewer of quickstart: %s", body)
	}
	if body := stream(other); strings.Contains(body, "quickstart") {
		t.Errorf("event stream as a viewer of another application: %s", body)
	}
	// The audit log: a pause of quickstart is seen by its auditors only.
	if code, body := post(t, s, "/v1/apps/quickstart/services/web:pause", apiv1.ChannelRequest{ReleaseChannel: "prod"}); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	if body := get(as(t.Context(), "qa", auth.Binding{Role: auth.RoleAdmin, Application: "quickstart"}), "/v1/audit"); !strings.Contains(body, ":pause") {
		t.Errorf("audit as an admin of quickstart: %s", body)
	}
	if body := get(as(t.Context(), "oa", auth.Binding{Role: auth.RoleAdmin, Application: "other"}), "/v1/audit"); strings.Contains(body, "quickstart") {
		t.Errorf("audit as an admin of another application: %s", body)
	}
}

// TestAccessDocListsEveryRoute: docs/access.md lists every route of the
// table with its permission, and no route that is not in it.
func TestAccessDocListsEveryRoute(t *testing.T) {
	s, _ := newPushedServer(t)
	doc, err := os.ReadFile("../../docs/access.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z]+ /[^`]*)` \\| ([a-z]+) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = m[2]
	}
	for _, rt := range s.table {
		key := rt.method + " " + rt.path
		want := string(rt.perm)
		if want == "" {
			want = "none"
		}
		got, ok := documented[key]
		switch {
		case !ok:
			t.Errorf("docs/access.md does not list %s", key)
		case got != want:
			t.Errorf("docs/access.md says %s needs %s; the route table says %s", key, got, want)
		}
		delete(documented, key)
	}
	for key := range documented {
		t.Errorf("docs/access.md lists %s, which is not a route", key)
	}
}
