package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
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
		writeServiceList(rec, list)
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
