package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// TestTakeService: the records of each service are split off a list sorted
// by application and service, skipping services not asked for.
func TestTakeService(t *testing.T) {
	t.Parallel()
	type rec struct{ app, svc, rc string }
	list := []rec{{"a", "x", "1"}, {"a", "y", "1"}, {"a", "y", "2"}, {"b", "x", "1"}, {"c", "z", "1"}}
	key := func(r rec) (string, string) { return r.app, r.svc }
	var got []string
	rest := list
	for _, svc := range [][2]string{{"a", "y"}, {"b", "w"}, {"b", "x"}, {"c", "z"}, {"d", "a"}} {
		var mine []rec
		rest, mine = takeService(rest, svc[0], svc[1], key)
		got = append(got, fmt.Sprint(svc, mine))
	}
	want := "[[a y] [{a y 1} {a y 2}] [b w] [] [b x] [{b x 1}] [c z] [{c z 1}] [d a] []]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
	if len(rest) != 0 {
		t.Errorf("left %v", rest)
	}
}

// TestWriteServiceList: the list written one service at a time is the JSON
// the whole value encodes to.
func TestWriteServiceList(t *testing.T) {
	t.Parallel()
	for _, list := range []*apiv1.ServiceList{
		{Services: []apiv1.ServiceStatus{}},
		{Services: []apiv1.ServiceStatus{
			{Application: "a", Service: "x<&>", ReleaseChannels: []apiv1.ChannelStatus{{Name: "prod", Status: "CONVERGED"}}},
			{Application: "b", Service: "y", ReleaseChannels: []apiv1.ChannelStatus{}},
		}},
	} {
		rec := httptest.NewRecorder()
		lw := &serviceListWriter{w: rec}
		for i := range list.Services {
			if err := lw.add(&list.Services[i]); err != nil {
				t.Fatal(err)
			}
		}
		lw.end()
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(list); err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", rec.Body, err)
		}
		if err := json.Unmarshal(buf.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("wrote %s\nwant  %s", rec.Body, buf.Bytes())
		}
	}
}

// TestListServicesInSpans: the list read a few services at a time (spans
// across applications, services without instances or observations between
// others) gives each service the status built from its own instances and
// observations, in order.
func TestListServicesInSpans(t *testing.T) {
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, _ := newTestServer(t, st, t.TempDir(), EdgeConfig{})
	ctx := local(t.Context())
	var req apiv1.ApplyConfigsRequest
	add := func(src, body string) {
		req.Configs = append(req.Configs, apiv1.Config{Source: src, Body: json.RawMessage(body)})
	}
	add("rt.json", `{"runtime":{"name":"rt","fake":{}}}`)
	type svc struct{ app, name string }
	var svcs []svc
	for _, app := range []string{"a", "b"} {
		add(app+".json", `{"application":{"name":"`+app+`","releaseChannels":[{"name":"one","runtimes":[{"runtime":"rt"}]},{"name":"two","runtimes":[{"runtime":"rt"}]}]}}`)
		for i := range 4 {
			name := fmt.Sprintf("s%d", i)
			add(app+name+".json", `{"service":{"name":"`+name+`","application":"`+app+`","kubernetesConfig":{"type":"KUBERNETES",`+
				`"inlined":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"}}}`)
			svcs = append(svcs, svc{app, name})
		}
	}
	if _, err := s.applyConfigs(ctx, req); err != nil {
		var ve *validationError
		if errors.As(err, &ve) {
			t.Fatalf("%v: %+v", err, ve.details)
		}
		t.Fatal(err)
	}
	for i, v := range svcs {
		push, err := s.push(ctx, v.app, v.name, apiv1.PushRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			continue // this one has no instances yet
		}
		b := &store.Batch{}
		for _, rc := range []string{"one", "two"} {
			b.Instances = append(b.Instances, store.Instance{Application: v.app, Service: v.name, ReleaseChannel: rc,
				DesiredStateID: push.DesiredStateID, Status: ds.StatusConverging, Message: fmt.Sprintf("%s/%s/%s", v.app, v.name, rc)})
			b.Observations = append(b.Observations, store.Observation{Application: v.app, Service: v.name, ReleaseChannel: rc,
				DesiredStateID: push.DesiredStateID, Message: "seen " + v.name,
				Info: []store.ObservedInfo{{Name: "where", Text: v.app + "/" + v.name + "/" + rc}}})
		}
		if err := st.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	defer func(n int) { listSpan = n }(listSpan)
	for _, span := range []int{1, 3, 256} {
		listSpan = span
		var got []apiv1.ServiceStatus
		if err := s.listServices(ctx, func(st *apiv1.ServiceStatus) error { got = append(got, *st); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(svcs) {
			t.Fatalf("span %d: %d services listed, want %d", span, len(got), len(svcs))
		}
		for i, v := range svcs {
			rec, err := st.ActiveDesiredState(ctx, v.app, v.name)
			if err != nil {
				t.Fatal(err)
			}
			insts, err := st.ListInstances(ctx, v.app, v.name)
			if err != nil {
				t.Fatal(err)
			}
			obs, err := st.ListObservations(ctx, v.app, v.name)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.buildStatus(ctx, rec, insts, obs, false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[i], *want) {
				t.Errorf("span %d: service %d listed as\n%+v\nwant %+v", span, i, got[i], *want)
			}
		}
		// The brief list (the summary's) tells the same status, from the
		// instances alone.
		var brief []apiv1.ServiceStatus
		if err := s.listServicesAs(ctx, true, func(st *apiv1.ServiceStatus) error { brief = append(brief, *st); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(brief) != len(got) {
			t.Fatalf("span %d: %d services in brief, want %d", span, len(brief), len(got))
		}
		for i := range got {
			b, full := brief[i], got[i]
			if b.Application != full.Application || b.Service != full.Service || b.Status != full.Status || b.DesiredVersion != full.DesiredVersion {
				t.Errorf("span %d: brief %s/%s %s %s, full %s/%s %s %s", span, b.Application, b.Service, b.Status, b.DesiredVersion,
					full.Application, full.Service, full.Status, full.DesiredVersion)
			}
			if len(b.ReleaseChannels) != 0 && len(b.ReleaseChannels) != len(full.ReleaseChannels) {
				t.Errorf("span %d: %s/%s has %d channels in brief, %d in full", span, b.Application, b.Service, len(b.ReleaseChannels), len(full.ReleaseChannels))
			}
		}
	}
}
