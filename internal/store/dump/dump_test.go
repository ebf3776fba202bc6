package dump_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// everyKind is one record of each kind, with values that are easy to lose:
// nanoseconds, empty and absent bytes, output that is not text.
func everyKind() []dump.Record {
	return []dump.Record{
		dump.Config{Kind: "service", Name: "shop/web", Version: 2, Body: []byte{}, Hash: "h", CreatedAt: t0},
		dump.Config{Kind: "service", Name: "shop/web", Version: 3, Body: []byte("{\n \"a\" : 1 }\x00\xff"), Hash: "h2", Source: "web.pvn.yaml", CreatedAt: t0},
		dump.DesiredState{ID: "a", Application: "shop", Service: "web", Compiled: []byte(`{"x": "<&>"}`), Params: []byte{}, CreatedAt: t0, ReplacedBy: "b"},
		dump.DesiredState{ID: "b", Application: "shop", Service: "web", CompiledFrom: "a", ReleaseChannels: []string{"prod"}, CreatedAt: t0.Add(1)},
		dump.DesiredState{ID: "c", Application: "shop", Service: "api", CreatedAt: t0, PrunedAt: t0.Add(2)},
		dump.Approval{DesiredStateID: "a", Topic: "prod", User: "alice", Reject: true, Comment: "no", CreatedAt: t0},
		dump.Instance{Application: "shop", Service: "web", ReleaseChannel: "prod", Satisfied: []string{"x@1"}, Revision: 7, AppliedAt: t0},
		dump.Observation{Application: "shop", Service: "web", ReleaseChannel: "prod", Objects: []store.ObservedObject{{ObjectType: "Deployment", Name: "web"}}, Since: t0},
		dump.Event{Seq: 3, Time: t0, Type: "pushed", Message: "ünïcödé", Data: []byte{}},
		dump.Event{Seq: 9, Time: t0, Type: "pushed", Data: []byte(`{"a":1}`)},
		dump.TaskRun{ID: 4, Application: "shop", Service: "web", ReleaseChannel: "prod", Kind: "apply", Command: []string{"sh", "-c", "x"},
			StartedAt: t0, FinishedAt: t0, Stdout: []byte("\x00\xff\xfe\x80"), Stderr: []byte("e"), Truncated: true},
		dump.Task{ID: 5, Key: "shop/web", Instance: "prod", Kind: "apply", Payload: []byte{1}, Status: store.TaskRunning, Owner: "r", Token: 3, Attempts: 2,
			Expires: t0, CreatedAt: t0, ClaimedAt: t0},
		dump.Lease{Key: "shop/web", Owner: "e", Token: 4, Expires: t0},
		dump.RuntimeFacts{Runtime: "k8s", KubeVersion: "v1.34.1", APIVersions: []string{"v1"}, ObservedAt: t0},
		dump.LinkedRuntime{Name: "edge", TokenHash: "ab12", CreatedAt: t0},
		dump.LinkedRuntime{Name: "prod", Labels: map[string]string{"region": "eu", "z": ""}, TokenHash: "cd34", CreatedAt: t0,
			Agent: store.AgentState{Connected: true, Replica: "s1", Version: "v1", Mode: "kubernetes", Host: "h",
				ConnectedAt: t0, HeartbeatAt: t0.Add(1), DisconnectedAt: t0.Add(2), Error: "e"}},
		dump.APIToken{ID: 2, Name: "ci", Hash: "ef56", Roles: []string{"deployer@shop"}, CreatedBy: "admin", CreatedAt: t0,
			RevokedAt: t0.Add(1), RevokedBy: "alice", LastUsedAt: t0.Add(2)},
		dump.APIToken{ID: 5, Name: "ci", Hash: "ab78", CreatedAt: t0},
		dump.AuditRecord{Seq: 4, Time: t0, Identity: "ci", IdentityKind: "token", Source: "192.0.2.7:51234",
			Action: "POST /v1/apps/{app}/services/{svc}:approve", Application: "shop", Service: "web", ReleaseChannel: "prod",
			Target: "approval", Status: 403, Outcome: "permission_denied", Message: "ci lacks permission \"approve\""},
		dump.AuditRecord{Seq: 8, Time: t0, Identity: "alice", Action: "POST /v1/tokens", Outcome: "ok"},
		dump.NotifyTarget{Name: "hooks", Kind: store.NotifyWebhook, Filter: store.NotifyFilter{Types: []string{"service.deployed"}, Channels: []string{"prod"}},
			Spec: []byte("\x01sealed\xff"), Source: "config", CreatedBy: "alice", CreatedAt: t0},
		dump.Delivery{ID: 7, Target: "hooks", Key: "shop/web", Type: "service.deployed", EventSeq: 9, State: store.DeliveryPending, Attempts: 2,
			NextAt: t0, LastError: "503 ✗", Owner: "s1", ClaimedUntil: t0.Add(1), CreatedAt: t0},
		dump.Delivery{ID: 8, Target: "gone", Key: "shop/web", Type: "service.deployed", EventSeq: 100, State: store.DeliveryDelivered, Attempts: 1,
			NextAt: t0, CreatedAt: t0, DeliveredAt: t0.Add(2)},
		dump.Process{ID: 1, Kind: "apply", Handle: []byte("{}"), StartedAt: t0},
	}
}

func writeDump(t *testing.T, recs []dump.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := dump.NewWriter(&buf, dump.Header{Store: "sqlite", ExportedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAll(r io.Reader) (dump.Header, []dump.Record, error) {
	dr, err := dump.NewReader(r)
	if err != nil {
		return dump.Header{}, nil, err
	}
	var recs []dump.Record
	for {
		rec, err := dr.Next()
		if errors.Is(err, io.EOF) {
			return dr.Header(), recs, nil
		}
		if err != nil {
			return dr.Header(), recs, err
		}
		recs = append(recs, rec)
	}
}

// TestWriteRead: every kind of record comes back as written, and the dump
// is a header, one line per record and the end line.
func TestWriteRead(t *testing.T) {
	t.Parallel()
	want := everyKind()
	d := writeDump(t, want)
	lines := strings.Split(strings.TrimSuffix(string(d), "\n"), "\n")
	if len(lines) != len(want)+2 {
		t.Fatalf("%d lines, want %d", len(lines), len(want)+2)
	}
	if lines[0] != `{"format":"drover-dump","version":1,"exportedAt":"2026-01-02T03:04:05.123456789Z","store":"sqlite"}` {
		t.Errorf("header %s", lines[0])
	}
	if !strings.HasPrefix(lines[1], `{"kind":"config","record":{"kind":"service"`) || lines[len(lines)-1] != `{"kind":"end","record":{"records":24}}` {
		t.Errorf("first record %s, end %s", lines[1], lines[len(lines)-1])
	}
	if !strings.Contains(string(d), `"compiled":"eyJ4IjogIjwmPiJ9"`) {
		t.Errorf("compiled bytes not in base64: %s", lines[3])
	}
	for _, want := range []string{
		`{"kind":"linkedRuntime","record":{"name":"edge","tokenHash":"ab12","createdAt":"2026-01-02T03:04:05.123456789Z","agent":{"connected":false}}}`,
		`{"kind":"apiToken","record":{"id":5,"name":"ci","hash":"ab78","createdAt":"2026-01-02T03:04:05.123456789Z"}}`,
		`{"kind":"audit","record":{"seq":8,"time":"2026-01-02T03:04:05.123456789Z","identity":"alice","action":"POST /v1/tokens","outcome":"ok"}}`,
		`{"kind":"notifyTarget","record":{"name":"hooks","kind":"webhook","filter":{"types":["service.deployed"],"channels":["prod"]},"spec":"AXNlYWxlZP8=","source":"config","createdBy":"alice","createdAt":"2026-01-02T03:04:05.123456789Z"}}`,
		`{"kind":"delivery","record":{"id":8,"target":"gone","key":"shop/web","type":"service.deployed","eventSeq":100,"state":"delivered","attempts":1,"nextAt":"2026-01-02T03:04:05.123456789Z","createdAt":"2026-01-02T03:04:05.123456789Z","deliveredAt":"2026-01-02T03:04:05.123456791Z"}}`,
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("no line %s in\n%s", want, d)
		}
	}
	h, got, err := readAll(bytes.NewReader(d))
	if err != nil {
		t.Fatal(err)
	}
	if h.Format != dump.Format || h.Version != dump.Version || !h.ExportedAt.Equal(t0) || h.Store != "sqlite" {
		t.Errorf("header %+v", h)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n%#v\nwant\n%#v", got, want)
	}
}

// TestReadRefuses: what is not a whole, well-formed dump of a version this
// drover reads is refused, with the line named.
func TestReadRefuses(t *testing.T) {
	t.Parallel()
	const header = `{"format":"drover-dump","version":1,"exportedAt":"2026-01-02T03:04:05Z"}` + "\n"
	const ds = `{"kind":"desiredState","record":{"id":"a","application":"shop","service":"web","createdAt":"2026-01-02T03:04:05Z"}}` + "\n"
	event := func(seq string) string {
		return `{"kind":"event","record":{"seq":` + seq + `,"time":"2026-01-02T03:04:05Z","type":"x"}}` + "\n"
	}
	end := func(n string) string { return `{"kind":"end","record":{"records":` + n + `}}` + "\n" }
	token := func(id, name, hash, more string) string {
		return `{"kind":"apiToken","record":{"id":` + id + `,"name":"` + name + `","hash":"` + hash + `","createdAt":"2026-01-02T03:04:05Z"` + more + `}}` + "\n"
	}
	audit := func(seq, more string) string {
		return `{"kind":"audit","record":{"seq":` + seq + `,"time":"2026-01-02T03:04:05Z"` + more + `}}` + "\n"
	}
	target := func(name, kind, more string) string {
		return `{"kind":"notifyTarget","record":{"name":"` + name + `","kind":"` + kind + `","createdAt":"2026-01-02T03:04:05Z"` + more + `}}` + "\n"
	}
	delivery := func(id, target, state, more string) string {
		return `{"kind":"delivery","record":{"id":` + id + `,"target":"` + target + `","key":"shop/web","type":"service.deployed","eventSeq":1,"state":"` +
			state + `","nextAt":"2026-01-02T03:04:05Z","createdAt":"2026-01-02T03:04:05Z"` + more + `}}` + "\n"
	}
	const delivered = `,"deliveredAt":"2026-01-02T03:04:06Z"`
	const revoked = `,"revokedAt":"2026-01-02T03:04:06Z"`
	const who = `,"identity":"ci","action":"POST /v1/x","outcome":"ok"`
	for _, c := range []struct{ name, dump, want string }{
		{"empty", "", "the input is empty"},
		{"not a dump", "hello\n", "line 1: not a drover dump"},
		{"another format", `{"format":"other","version":1}` + "\n", "line 1: not a drover dump"},
		{"newer version", `{"format":"drover-dump","version":2}` + "\n" + end("0"), "line 1: the dump is of format version 2, newer than this drover reads (version 1)"},
		{"no version", `{"format":"drover-dump"}` + "\n", "line 1: invalid format version 0"},
		{"header only", header, "line 1: the dump ends without its end line"},
		{"truncated", header + ds + event("1"), "line 3: the dump ends without its end line: it is truncated"},
		{"cut in a line", header + ds + event("1")[:20], "line 3: the line is cut short"},
		{"corrupt", header + ds + "{\"kind\":\"event\",\"rec\n" + end("1"), "line 3: not a dump record"},
		{"unknown kind", header + `{"kind":"user","record":{}}` + "\n" + end("1"), `line 2: unknown record kind "user"`},
		{"unknown field", header + `{"kind":"lease","record":{"key":"k","token":1,"color":"red"}}` + "\n" + end("1"), `line 2: lease record: json: unknown field "color"`},
		{"no record", header + `{"kind":"lease"}` + "\n" + end("1"), "line 2: lease line without its record"},
		{"out of order", header + event("1") + ds + end("2"), "line 3: desiredState record after events"},
		{"approval first", header + `{"kind":"approval","record":{"desiredStateId":"a","topic":"t","user":"u","createdAt":"2026-01-02T03:04:05Z"}}` + "\n" + end("1"),
			`line 2: approval record: approval of "t" by "u": no desired state "a" before it`},
		{"shared copy of nothing", header + strings.Replace(ds, `"service":"web"`, `"service":"web","compiledFrom":"z"`, 1) + end("1"),
			"line 2: desiredState record: desired state a: compiledFrom z names no desired state before it"},
		{"duplicate desired state", header + ds + ds + end("2"), "line 3: desiredState record: desired state a appears twice"},
		{"seqs out of order", header + event("5") + event("5") + end("2"), "line 3: event record: event seq 5 after 5"},
		{"linked runtime without a token hash", header + `{"kind":"linkedRuntime","record":{"name":"prod","createdAt":"2026-01-02T03:04:05Z","agent":{"connected":false}}}` + "\n" + end("1"),
			`line 2: linkedRuntime record: linked runtime "prod": name and token hash are required`},
		{"unknown agent field", header + `{"kind":"linkedRuntime","record":{"name":"prod","tokenHash":"ab","createdAt":"2026-01-02T03:04:05Z","agent":{"token":"secret"}}}` + "\n" + end("1"),
			`line 2: linkedRuntime record: json: unknown field "token"`},
		{"api token without a hash", header + token("1", "ci", "", "") + end("1"),
			`line 2: apiToken record: api token 1 ("ci"): name, hash and createdAt are required`},
		{"api token without a creation time", header + strings.Replace(token("1", "ci", "ab", ""), `,"createdAt":"2026-01-02T03:04:05Z"`, "", 1) + end("1"),
			`line 2: apiToken record: api token 1 ("ci"): name, hash and createdAt are required`},
		{"api token revoked by someone but not revoked", header + token("1", "ci", "ab", `,"revokedBy":"alice"`) + end("1"),
			"line 2: apiToken record: api token 1 (ci): revokedBy is set but revokedAt is not"},
		{"api token ids out of order", header + token("2", "a", "ab", "") + token("2", "b", "cd", "") + end("2"),
			"line 3: apiToken record: api token id 2 after 2"},
		{"api token hash twice", header + token("1", "a", "ab12cd", revoked) + token("2", "b", "ab12cd", "") + end("2"),
			"line 3: apiToken record: api token 2 (b) has the hash of api token 1"},
		{"two live api tokens of one name", header + token("1", "ci", "ab", revoked) + token("2", "ci", "cd", "") + token("3", "ci", "ef", "") + end("3"),
			"line 4: apiToken record: api token 2 and api token 3 are both named ci and neither is revoked"},
		{"unknown api token field", header + token("1", "ci", "ab", `,"token":"secret"`) + end("1"),
			`line 2: apiToken record: json: unknown field "token"`},
		{"audit record without an outcome", header + audit("1", `,"identity":"ci","action":"POST /v1/x"`) + end("1"),
			"line 2: audit record: audit record 1: time, identity, action and outcome are required"},
		{"audit record without a time", header + strings.Replace(audit("1", who), `,"time":"2026-01-02T03:04:05Z"`, "", 1) + end("1"),
			"line 2: audit record: audit record 1: time, identity, action and outcome are required"},
		{"audit seqs out of order", header + audit("4", who) + audit("4", who) + end("2"),
			"line 3: audit record: audit seq 4 after 4"},
		{"api token after audit", header + audit("1", who) + token("1", "ci", "ab", "") + end("2"),
			"line 3: apiToken record after audit records"},
		{"audit after a process", header + `{"kind":"process","record":{"id":1,"kind":"apply","startedAt":"2026-01-02T03:04:05Z"}}` + "\n" +
			audit("1", who) + end("2"), "line 3: audit record after processes"},
		{"notification target of an unknown kind", header + target("hooks", "email", "") + end("1"),
			`line 2: notifyTarget record: notification target hooks: kind "email" is neither webhook nor slack`},
		{"notification target filtering a list", header + target("hooks", "webhook", `,"filter":{"applications":["a,b"]}`) + end("1"),
			`line 2: notifyTarget record: filter applications: "a,b" is not a name`},
		{"notification target without a creation time", header + strings.Replace(target("hooks", "webhook", ""), `,"createdAt":"2026-01-02T03:04:05Z"`, "", 1) + end("1"),
			"line 2: notifyTarget record: notification target hooks: createdAt is required"},
		{"notification targets out of order", header + target("b", "webhook", "") + target("a", "slack", "") + end("2"),
			"line 3: notifyTarget record: notification target a after b: they must be ordered by name"},
		{"notification target twice", header + target("a", "webhook", "") + target("a", "slack", "") + end("2"),
			"line 3: notifyTarget record: notification target a after a"},
		{"delivery to no target", header + event("1") + delivery("1", "hooks", "pending", "") + end("2"),
			`line 3: delivery record: delivery 1 (pending): no notification target "hooks" before it`},
		{"delivery of no event", header + event("1") + target("hooks", "webhook", "") + delivery("1", "hooks", "dead", `,"eventSeq":2`) + end("3"),
			"line 4: delivery record: delivery 1 (dead): event 2 is not before it"},
		{"delivery of an unknown state", header + delivery("1", "gone", "sent", "") + end("1"),
			`line 2: delivery record: delivery 1: unknown state "sent"`},
		{"delivery delivered at no time", header + delivery("1", "gone", "delivered", "") + end("1"),
			"line 2: delivery record: delivery 1: a delivered delivery needs its deliveredAt"},
		{"delivery claimed by no one", header + delivery("1", "gone", "delivered", `,"deliveredAt":"2026-01-02T03:04:05Z","claimedUntil":"2026-01-02T03:04:05Z"`) + end("1"),
			"line 2: delivery record: delivery 1: owner and claimedUntil go together"},
		{"delivery without a key", header + strings.Replace(delivery("1", "gone", "dead", ""), `"key":"shop/web",`, "", 1) + end("1"),
			"line 2: delivery record: delivery 1: target, key, type, a positive eventSeq"},
		{"delivery ids out of order", header + delivery("2", "gone", "delivered", delivered) + delivery("2", "gone", "delivered", delivered) + end("2"),
			"line 3: delivery record: delivery id 2 after 2"},
		{"delivery before its target", header + event("1") + delivery("1", "gone", "delivered", delivered) + target("hooks", "webhook", "") + end("3"),
			"line 4: notifyTarget record after deliveries"},
		{"secret after a notification target", header + target("hooks", "webhook", "") +
			`{"kind":"secret","record":{"key":"db","version":0,"value":"eA==","createdAt":"2026-01-02T03:04:05Z"}}` + "\n" + end("2"),
			"line 3: secret record after notification targets"},
		{"end miscounts", header + ds + end("2"), "line 3: the end line counts 2 records, the dump holds 1"},
		{"after the end", header + ds + end("1") + ds, "line 4: data after the end line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := readAll(strings.NewReader(c.dump))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one with %q", err, c.want)
			}
		})
	}
}

// TestReadTokenErrorsHideHash: the errors of a dump's API tokens name them
// by id and name, never by their hash.
func TestReadTokenErrorsHideHash(t *testing.T) {
	t.Parallel()
	const hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	recs := []dump.Record{
		dump.APIToken{ID: 1, Name: "a", Hash: hash, CreatedAt: t0},
		dump.APIToken{ID: 2, Name: "b", Hash: hash, CreatedAt: t0},
	}
	_, _, err := readAll(bytes.NewReader(writeDump(t, recs)))
	if err == nil || strings.Contains(err.Error(), hash) {
		t.Errorf("error %v, want one without the hash", err)
	}
}

// TestReadOlderDump: a dump of a drover that knew no API tokens and no audit
// log (linked runtimes, then processes) reads as it did.
func TestReadOlderDump(t *testing.T) {
	t.Parallel()
	const older = `{"format":"drover-dump","version":1,"exportedAt":"2025-11-02T03:04:05Z","store":"sqlite"}
{"kind":"event","record":{"seq":1,"time":"2025-11-02T03:04:05Z","type":"pushed"}}
{"kind":"linkedRuntime","record":{"name":"edge","tokenHash":"ab12","createdAt":"2025-11-02T03:04:05Z","agent":{"connected":false}}}
{"kind":"process","record":{"id":1,"kind":"apply","handle":"e30=","startedAt":"2025-11-02T03:04:05Z"}}
{"kind":"end","record":{"records":3}}
`
	_, recs, err := readAll(strings.NewReader(older))
	if err != nil || len(recs) != 3 {
		t.Fatalf("read %d records: %v; want 3", len(recs), err)
	}
}

// TestReadNextAfterError: a reader that failed keeps failing.
func TestReadNextAfterError(t *testing.T) {
	t.Parallel()
	d := writeDump(t, everyKind()[:2])
	dr, err := dump.NewReader(bytes.NewReader(d[:len(d)-3]))
	if err != nil {
		t.Fatal(err)
	}
	var first error
	for range 5 {
		if _, err := dr.Next(); err != nil {
			if first == nil {
				first = err
			} else if err != first { //nolint:errorlint // the same error again
				t.Errorf("Next after %v = %v", first, err)
			}
		}
	}
	if first == nil || !strings.Contains(first.Error(), "line 4") {
		t.Errorf("error %v, want one naming line 4", first)
	}
}

// TestWriterOrder: a writer refuses records out of the order of kinds, and
// writes nothing after Close.
func TestWriterOrder(t *testing.T) {
	t.Parallel()
	w, err := dump.NewWriter(io.Discard, dump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(dump.Event{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(dump.Config{Kind: "x"}); err == nil || !strings.Contains(err.Error(), "configs after events") {
		t.Errorf("a config after an event: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(dump.Event{Seq: 2}); err == nil {
		t.Error("a write after Close succeeded")
	}
	if got := w.Counts().String(); got != "1 events" {
		t.Errorf("counts %q", got)
	}
}

func TestCounts(t *testing.T) {
	t.Parallel()
	c := dump.Counts{dump.KindEvent: 340, dump.KindConfig: 12, dump.KindTaskRun: 2, dump.KindLease: 0}
	if got := c.String(); got != "12 configs, 340 events, 2 task runs" {
		t.Errorf("String = %q", got)
	}
	if c.Total() != 354 {
		t.Errorf("Total = %d", c.Total())
	}
	if got := (dump.Counts{}).String(); got != "no records" {
		t.Errorf("String of nothing = %q", got)
	}
	err := dump.NotEmptyError(dump.Counts{dump.KindEvent: 1})
	if !errors.Is(err, dump.ErrNotEmpty) || !strings.Contains(err.Error(), "it holds 1 events") {
		t.Errorf("NotEmptyError = %v", err)
	}
}

// TestConversionsKeepEveryField: the record types that do not convert
// directly to and from the store's carry every field of it. (The others
// have the store type's fields exactly, or would not compile.)
func TestConversionsKeepEveryField(t *testing.T) {
	t.Parallel()
	d := store.DesiredState{
		ID: "a", Application: "b", Service: "c", Version: "d", ConfigVersion: 1, Compiled: []byte("e"), Params: []byte("f"),
		Rollback: true, ReleaseChannels: []string{"g"}, CreatedBy: "h", CreatedAt: t0, ReplacedBy: "i", PrunedAt: t0,
	}
	filled(t, d)
	if got := dump.FromDesiredState(d, d.Compiled, "").Store(); !reflect.DeepEqual(got, d) {
		t.Errorf("desired state %+v came back as %+v", d, got)
	}
	if got := dump.FromDesiredState(d, nil, "j"); got.Compiled != nil || got.CompiledFrom != "j" {
		t.Errorf("a desired state sharing a copy: %+v", got)
	}
	r := store.TaskRun{
		ID: 1, Application: "a", Service: "b", ReleaseChannel: "c", Runtime: "d", Kind: "e", Version: "f", Command: []string{"g"},
		ExitCode: 2, Error: "h", StartedAt: t0, FinishedAt: t0, Stdout: "\xff", Stderr: "\x00", Truncated: true,
	}
	filled(t, r)
	if got := dump.FromTaskRun(r).Store(); !reflect.DeepEqual(got, r) {
		t.Errorf("task run %+v came back as %+v", r, got)
	}
	dl := store.Delivery{
		ID: 1, Target: "a", Type: "b", EventSeq: 2, State: store.DeliveryDead, Attempts: 3, NextAt: t0, LastError: "c", Owner: "d",
		ClaimedUntil: t0, CreatedAt: t0, DeliveredAt: t0, Event: store.Event{Seq: 2},
	}
	filled(t, dl)
	rec := dump.DeliveryOf(dl, "e")
	filled(t, rec)
	dl.Event = store.Event{} // a delivery record has no event, which is the event record of its seq
	if got := rec.Store(); !reflect.DeepEqual(got, dl) || rec.Key != "e" {
		t.Errorf("delivery %+v came back as %+v (key %q)", dl, got, rec.Key)
	}
}

// filled fails unless every field of v is set, so that a field added to a
// store type is added to the conversion test too.
func filled(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Errorf("%T.%s is not set in the test", v, rv.Type().Field(i).Name)
		}
	}
}
