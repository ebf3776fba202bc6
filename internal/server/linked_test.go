package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

func newLinkServer(t *testing.T) (*Server, *sqlite.Store, *[]string) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, _ := newTestServer(t, st, t.TempDir(), EdgeConfig{})
	var cut []string
	s.agents = Agents{URL: "https://drover.example:7421", Fingerprint: strings.Repeat("ab", 32),
		Disconnect: func(name, _ string) { cut = append(cut, name) }}
	return s, st, &cut
}

func call(t *testing.T, s *Server, method, path string, body any) *httptest.ResponseRecorder {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(local(t.Context()), method, path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// Linking stores only the token's hash, prints how to run the agent, and
// the linked runtime is listed; unlink and rotate cut the agent off.
func TestLinkRuntime(t *testing.T) {
	s, st, cut := newLinkServer(t)
	rec := call(t, s, http.MethodPost, "/v1/runtimes:link", apiv1.LinkRuntimeRequest{Name: "prod-eu", Labels: map[string]string{"env": "prod"}})
	if rec.Code != http.StatusOK {
		t.Fatalf("link: %d %s", rec.Code, rec.Body)
	}
	var resp apiv1.LinkRuntimeResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Token, agentTokenPrefix) || len(resp.Token) < len(agentTokenPrefix)+20 {
		t.Errorf("token %q", resp.Token)
	}
	for _, want := range []string{"--server https://drover.example:7421", "--fingerprint sha256:" + s.agents.Fingerprint, "--token-file prod-eu.token"} {
		if !strings.Contains(resp.Command, want) {
			t.Errorf("command %q lacks %q", resp.Command, want)
		}
	}
	// The token stays off the command line (other users see arguments).
	if strings.Contains(resp.Command, resp.Token) || strings.Contains(resp.Command, "--token ") || resp.TokenFile != "prod-eu.token" {
		t.Errorf("command %q (token file %q) carries the token", resp.Command, resp.TokenFile)
	}
	for _, want := range []string{"kind: Namespace", "kind: ServiceAccount", "kind: ClusterRole", "kind: ClusterRoleBinding", "kind: Secret", "kind: Deployment", `"--mode", "kubernetes"`, resp.Token} {
		if !strings.Contains(resp.Manifests, want) {
			t.Errorf("manifests lack %q", want)
		}
	}
	lr, err := st.GetLinkedRuntime(t.Context(), "prod-eu")
	if err != nil {
		t.Fatal(err)
	}
	if lr.TokenHash != auth.HashToken(resp.Token) || strings.Contains(lr.TokenHash, resp.Token) || lr.Labels["env"] != "prod" {
		t.Errorf("stored %+v", lr)
	}
	if rec := call(t, s, http.MethodPost, "/v1/runtimes:link", apiv1.LinkRuntimeRequest{Name: "prod-eu"}); rec.Code != http.StatusConflict {
		t.Errorf("second link: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range []apiv1.LinkRuntimeRequest{{Name: "Prod"}, {Name: ""}, {Name: "ok", Labels: map[string]string{"a=b": "c"}}, {Name: "ok", Namespace: "Bad_NS"},
		{Name: "ok", TokenFile: "a\nrm -rf ~"}} {
		if rec := call(t, s, http.MethodPost, "/v1/runtimes:link", bad); rec.Code != http.StatusBadRequest {
			t.Errorf("link %+v: %d %s", bad, rec.Code, rec.Body)
		}
	}

	rec = call(t, s, http.MethodGet, "/v1/runtimes", nil)
	var list apiv1.RuntimeList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Runtimes) != 1 || !list.Runtimes[0].Linked || list.Runtimes[0].Agent == nil || list.Runtimes[0].Agent.State != "never connected" ||
		list.Runtimes[0].Kind != "kubernetes" || list.Runtimes[0].Labels["env"] != "prod" {
		t.Errorf("list: %s", rec.Body)
	}
	if strings.Contains(rec.Body.String(), lr.TokenHash) {
		t.Error("the list shows the token hash")
	}

	rec = call(t, s, http.MethodPost, "/v1/runtimes/prod-eu:rotateToken", apiv1.LinkRuntimeRequest{TokenFile: "/home/ops/my tokens/it's.token"})
	var rotated apiv1.LinkRuntimeResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &rotated); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("rotate: %d %s", rec.Code, rec.Body)
	}
	if rotated.Token == resp.Token {
		t.Error("rotate kept the token")
	}
	if want := `--token-file '/home/ops/my tokens/it'\''s.token' `; !strings.Contains(rotated.Command, want) || strings.Contains(rotated.Command, rotated.Token) {
		t.Errorf("command %q lacks %q, or carries the token", rotated.Command, want)
	}
	if lr, _ := st.GetLinkedRuntime(t.Context(), "prod-eu"); lr.TokenHash != auth.HashToken(rotated.Token) {
		t.Error("rotate did not store the new hash")
	}
	if rec := call(t, s, http.MethodPost, "/v1/runtimes/prod-eu:unlink", struct{}{}); rec.Code != http.StatusOK {
		t.Fatalf("unlink: %d %s", rec.Code, rec.Body)
	}
	if rec := call(t, s, http.MethodPost, "/v1/runtimes/prod-eu:unlink", struct{}{}); rec.Code != http.StatusNotFound {
		t.Errorf("second unlink: %d %s", rec.Code, rec.Body)
	}
	if got := strings.Join(*cut, ","); got != "prod-eu,prod-eu" {
		t.Errorf("agents cut off: %q", got)
	}
}

// A linked runtime can be named by application configs with no runtime
// config of its own; a runtime config of its name adds labels; a runtime
// of another type cannot be linked under its name.
func TestLinkedRuntimeInConfigs(t *testing.T) {
	s, _, _ := newLinkServer(t)
	app := `{"application":{"name":"shop","releaseChannels":[{"name":"prod","runtimes":[{"runtime":"prod-eu"}]}]}}`
	req := apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{{Source: "shop.pvn.yaml", Body: json.RawMessage(app)}}}
	_, err := s.applyConfigs(local(t.Context()), req)
	var ve *validationError
	if !errors.As(err, &ve) || len(ve.details) != 1 || !strings.Contains(ve.details[0].Message, `unknown runtime "prod-eu"`) {
		t.Fatalf("apply before link: %#v", err)
	}
	if rec := call(t, s, http.MethodPost, "/v1/runtimes:link", apiv1.LinkRuntimeRequest{Name: "prod-eu", Labels: map[string]string{"region": "eu", "tier": "a"}}); rec.Code != http.StatusOK {
		t.Fatalf("link: %d %s", rec.Code, rec.Body)
	}
	if _, err := s.applyConfigs(local(t.Context()), req); err != nil {
		t.Fatalf("apply after link: %v", err)
	}
	rt := `{"runtime":{"name":"prod-eu","labels":[{"label":"tier","value":"b"}]}}`
	if _, err := s.applyConfigs(local(t.Context()), apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{{Source: "prod-eu.pvn.yaml", Body: json.RawMessage(rt)}}}); err != nil {
		t.Fatal(err)
	}
	list, err := s.listRuntimes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Runtimes) != 1 || !list.Runtimes[0].Configured || list.Runtimes[0].Labels["region"] != "eu" || list.Runtimes[0].Labels["tier"] != "b" {
		t.Errorf("list: %+v", list.Runtimes)
	}
	srcs, _, err := s.storedSources(t.Context(), "runtime")
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, src := range srcs {
		for _, l := range src.File.Runtime.Labels {
			labels = append(labels, l.Label+"="+l.Value)
		}
	}
	if got := strings.Join(labels, ","); got != "region=eu,tier=b" {
		t.Errorf("runtime labels the compiler sees: %s", got)
	}
	typed := `{"runtime":{"name":"prod-eu","fake":{}}}`
	_, err = s.applyConfigs(local(t.Context()), apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{{Source: "prod-eu.pvn.yaml", Body: json.RawMessage(typed)}}})
	if !errors.As(err, &ve) || len(ve.details) != 1 || !strings.Contains(ve.details[0].Message, "is linked") || ve.details[0].File != "prod-eu.pvn.yaml" {
		t.Errorf("a typed config of a linked runtime: %#v", err)
	}
	fake := `{"runtime":{"name":"sim","fake":{}}}`
	if _, err := s.applyConfigs(local(t.Context()), apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{{Source: "sim.pvn.yaml", Body: json.RawMessage(fake)}}}); err != nil {
		t.Fatal(err)
	}
	if rec := call(t, s, http.MethodPost, "/v1/runtimes:link", apiv1.LinkRuntimeRequest{Name: "sim"}); rec.Code != http.StatusPreconditionFailed && rec.Code != http.StatusConflict {
		t.Errorf("link of a fake runtime's name: %d %s", rec.Code, rec.Body)
	}
}

// A linked runtime's agent is described with what the server holds in
// memory: where it connected from, and a second agent it refused.
func TestLinkedAgentPresence(t *testing.T) {
	s, st, _ := newLinkServer(t)
	if err := st.LinkRuntime(t.Context(), store.LinkedRuntime{Name: "edge", TokenHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := st.PutAgentState(t.Context(), "edge", store.AgentState{Connected: true, Replica: "a", Version: "v1", ConnectedAt: at, HeartbeatAt: at}); err != nil {
		t.Fatal(err)
	}
	lr, err := st.GetLinkedRuntime(t.Context(), "edge")
	if err != nil {
		t.Fatal(err)
	}
	if info := s.describeAgent(lr, at); info.RemoteAddr != "" || info.Refused != nil || info.State != "connected" {
		t.Errorf("without presence: %+v", info)
	}
	refused := &apiv1.AgentAttempt{At: at.Add(time.Second), RemoteAddr: "10.0.0.9:5100", Version: "v2", Count: 3}
	s.agents.Presence = func(name string) AgentPresence {
		if name != "edge" {
			t.Errorf("presence of %q", name)
		}
		return AgentPresence{RemoteAddr: "10.0.0.5:41234", Refused: refused}
	}
	info := s.describeAgent(lr, at)
	if info.State != "connected" || info.RemoteAddr != "10.0.0.5:41234" || info.Refused != refused {
		t.Errorf("with presence: %+v", info)
	}
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"remoteAddr":"10.0.0.5:41234"`, `"refused":{"at":"2026-12-01T10:00:01Z","remoteAddr":"10.0.0.9:5100","version":"v2","count":3}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}
