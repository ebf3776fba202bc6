package server

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// The compiled config of a push: every channel with its runtime, gates and
// objects, or one channel; unknown channels and desired states are named.
func TestCompiled(t *testing.T) {
	t.Parallel()
	s, id := newPushedServer(t)
	ctx := local(t.Context())
	out, err := s.compiled(ctx, "quickstart", "web", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out.DesiredStateID != id || !out.Active || len(out.ReleaseChannels) != 2 {
		t.Fatalf("compiled: %+v", out)
	}
	staging, prod := out.ReleaseChannels[0], out.ReleaseChannels[1]
	if staging.Name != "staging" || prod.Name != "prod" || len(prod.DependsOn) != 1 || prod.DependsOn[0] != "staging" || len(prod.Approvals) != 1 {
		t.Errorf("channels: %+v\n%+v", staging, prod)
	}
	var deployment string
	for _, o := range prod.Objects {
		if strings.HasPrefix(o.Object, "Deployment ") {
			deployment = o.YAML
		}
	}
	if !strings.Contains(deployment, "replicas: 3") || !strings.Contains(deployment, "1.27") {
		t.Errorf("prod's Deployment:\n%s", deployment)
	}
	one, err := s.compiled(ctx, "quickstart", "web", id, "staging")
	if err != nil || len(one.ReleaseChannels) != 1 || one.ReleaseChannels[0].Name != "staging" {
		t.Errorf("staging alone: %+v, %v", one, err)
	}
	for _, c := range []struct{ app, svc, id, rc, want string }{
		{"quickstart", "web", "", "qa", `no release channel "qa"`},
		{"quickstart", "web", "ds-nope", "", `no desired state "ds-nope"`},
		{"quickstart", "api", id, "", `no desired state "` + id + `" of service quickstart/api`},
		{"quickstart", "api", "", "", "has no desired state"},
	} {
		_, err := s.compiled(ctx, c.app, c.svc, c.id, c.rc)
		var ae *apiError
		if !errors.As(err, &ae) || ae.code != "not_found" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// A compiled channel shows no secret: raw secret env, a runtime's secret
// parameters, a Secret's data, or a secret value met in another object.
func TestCompiledRedactsSecrets(t *testing.T) {
	t.Parallel()
	ch := &ds.Channel{Name: "prod", Backend: "kubernetes",
		Env:       map[string]string{"TOKEN": "env-s3cr3t", "MODE": "fast"},
		SecretEnv: []string{"TOKEN"},
		Objects: []json.RawMessage{
			json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"a":"env-s3cr3t","b":"hunter2-db"}}`),
			json.RawMessage(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"stringData":{"password":"hunter2-db"}}`),
		}}
	out := compiledChannel(ch)
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"env-s3cr3t", "hunter2-db"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("compiled shows %q: %s", leak, raw)
		}
	}
	if out.Env["TOKEN"] != "(redacted)" || out.Env["MODE"] != "fast" || len(out.Objects) != 2 || out.Objects[0].Object != "ConfigMap cfg" {
		t.Errorf("compiled: %+v", out)
	}
}

// A channel that waits for the approval of an apply healing drift
// (everyAction) lists that wait among its approvals, by the topic an
// approval names, so a person (and the web UI) can answer it.
func TestStatusListsDriftApproval(t *testing.T) {
	t.Parallel()
	s, id := newPushedServer(t)
	ctx := local(t.Context())
	rec, err := s.store.GetDesiredState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	inst := store.Instance{Application: "quickstart", Service: "web", ReleaseChannel: "staging", DesiredStateID: id,
		Status: ds.StatusWaitingManualApproval, Reason: ds.ReasonManualApprovalPending, ActionPending: true, ActionSeq: 2}
	st, err := s.buildStatus(ctx, rec, []store.Instance{inst}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	got := st.ReleaseChannels[0].Approvals
	if len(got) != 1 || got[0].Topic != "staging/apply-2" || got[0].Description != "apply after drift" || got[0].MinApprovers != 1 {
		t.Errorf("staging's approvals: %+v", got)
	}
	inst.ActionPending = false
	if st, err = s.buildStatus(ctx, rec, []store.Instance{inst}, nil, false); err != nil || len(st.ReleaseChannels[0].Approvals) != 0 {
		t.Errorf("no drift wait, approvals: %+v, %v", st.ReleaseChannels[0].Approvals, err)
	}
}

// A preview's parameters: what changes for the channel, a channel's own
// value over the push's, never a secret.
func TestParamChanges(t *testing.T) {
	t.Parallel()
	before := []apiv1.Param{{Name: "image", Value: "1.0"}, {Name: "tier", Value: "a"}, {Name: "key", Value: redactedValue}}
	after := []apiv1.Param{{Name: "image", Value: "2.0"}, {Name: "image", Value: "1.0", ReleaseChannel: "canary"},
		{Name: "extra", Value: "x"}, {Name: "key", Value: redactedValue}}
	got := paramChanges(before, after, "prod")
	want := []apiv1.ParamChange{{Name: "extra", To: "x"}, {Name: "image", From: "1.0", To: "2.0"}, {Name: "tier", From: "a"}}
	if !slices.Equal(got, want) {
		t.Errorf("prod: %+v, want %+v", got, want)
	}
	if got := paramChanges(before, after, "canary"); len(got) != 2 || got[0].Name != "extra" || got[1].Name != "tier" {
		t.Errorf("canary (its own image is unchanged): %+v", got)
	}
}
