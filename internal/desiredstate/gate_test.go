package desiredstate

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestDecodeChecksStoredBeforeGateKinds: a desired state stored before
// gate kinds were evaluators (testdata/gates-format2.json, written by
// that drover's Encode) decodes with its alert gate and commitDenylist
// ranges as gates of kinds "alert" and "commits", with their specs as
// stored, and encodes to the same bytes.
func TestDecodeChecksStoredBeforeGateKinds(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/gates-format2.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.TrimSpace(raw)
	c, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	checks := c.Channels[0].Checks
	if len(checks) != 4 {
		t.Fatalf("%d checks, want 4", len(checks))
	}
	alert, ranges, hours, smoke := checks[0], checks[1], checks[2], checks[3]
	if alert.Gate == nil || alert.Gate.Kind != "alert" || alert.PollInterval.String() != "15s" || alert.FailureBehavior != FailureBlock ||
		string(alert.Gate.Spec) != `{"url":"http://user:pw@alertmanager:9093","matchers":["severity=~\"sev1|sev2\"","team=\"a\u0026b\""]}` {
		t.Errorf("alert gate: %+v, gate %+v", alert, alert.Gate)
	}
	if ranges.Gate == nil || ranges.Gate.Kind != "commits" || !strings.Contains(string(ranges.Gate.Spec), `"ranges":[{"start":"1111111","end":"2222222"}]`) {
		t.Errorf("commit ranges: %+v", ranges.Gate)
	}
	if hours.Gate != nil || hours.Builtin == nil || !hours.Builtin.AlwaysPassing {
		t.Errorf("builtin: %+v", hours)
	}
	if smoke.Gate != nil || string(smoke.Command) != `{"protection":"smoke"}` || smoke.Shared != "k" || len(smoke.DependsOn) != 1 || smoke.Retry == nil {
		t.Errorf("extension: %+v", smoke)
	}
	again, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Errorf("encoded again differs:\n got %s\nwant %s", again, raw)
	}
}

// TestGateMembers: a gate of any kind is a member of the check named by
// its kind, beside the common fields; a null member is none; two are an
// error; a kind may not take a field's name.
func TestGateMembers(t *testing.T) {
	t.Parallel()
	g, err := NewGate("toy", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Check{Kind: CheckProtection, Name: "t", Lifecycle: PhaseDeployment, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"protection","name":"t","lifecycle":"deployment","entity":{"type":"","name":""},"toy":{"n":1}}`; string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	var back Check
	if err := json.Unmarshal(b, &back); err != nil || back.Gate == nil || back.Gate.Kind != "toy" || string(back.Gate.Spec) != `{"n":1}` || back.Name != "t" {
		t.Fatalf("decoded %+v (gate %+v): %v", back, back.Gate, err)
	}
	var none Check
	if err := json.Unmarshal([]byte(`{"kind":"protection","name":"n","alert":null}`), &none); err != nil || none.Gate != nil {
		t.Fatalf("null member: %+v, %v", none.Gate, err)
	}
	var two Check
	err = json.Unmarshal([]byte(`{"kind":"protection","alert":{},"commits":{}}`), &two)
	if err == nil || !strings.Contains(err.Error(), `two gates, "alert" and "commits"`) {
		t.Fatalf("two gates: %v", err)
	}
	for _, kind := range []string{"name", "Name", "command", "pollInterval", "protection", "", `a"b`} {
		if ValidGateKind(kind) == nil {
			t.Errorf("gate kind %q accepted", kind)
		}
	}
	if err := ValidGateKind("alert"); err != nil {
		t.Error(err)
	}
}

// TestAttachmentGate: a compiled protection attachment carries its gate as
// a member named by its kind (as the compiler's result stored it); its
// protection's name is no gate.
func TestAttachmentGate(t *testing.T) {
	t.Parallel()
	var atts []Attachment
	raw := `[{"attachment":"alertGate","protection":"alertGate","source":"drover","lifecycle":[{"deployment":{"failureBehavior":"BLOCK"}}],"pollInterval":"15s","alert":{"url":"http://am","matchers":["a=\"b\""]}}]`
	if err := json.Unmarshal([]byte(raw), &atts); err != nil {
		t.Fatal(err)
	}
	checks := []Check{{Kind: CheckProtection, Name: "alertGate", Lifecycle: PhaseDeployment, Source: "drover", Attachment: "alertGate"}}
	CompleteChecks(checks, atts)
	if g := checks[0].Gate; g == nil || g.Kind != "alert" || string(g.Spec) != `{"url":"http://am","matchers":["a=\"b\""]}` ||
		checks[0].PollInterval.String() != "15s" || checks[0].FailureBehavior != FailureBlock {
		t.Fatalf("completed check %+v, gate %+v", checks[0], g)
	}
}

// TestGateMemberScan: the gate is found beside members whose values hold
// what could mislead a reader of the object (braces and quotes in strings,
// nested objects and arrays, numbers, escapes, spaces), and a member
// named like a field in another case is that field (as encoding/json
// reads it).
func TestGateMemberScan(t *testing.T) {
	t.Parallel()
	raw := " {\n \"name\" : \"a}\\\"{,\" , \"entity\":{\"type\":\"x\",\"name\":\"[{\"}, \"dependsOn\":[\"a\",\"]\"], \"retry\":{\"base\":\"1s\"}, " +
		"\"shared\":null,\"Lifecycle\":\"deployment\", \"to\\u0079\" : {\"n\": [1, 2.5e3, true, false, null]} , \"kind\":\"protection\"}"
	var c Check
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	if c.Gate == nil || c.Gate.Kind != "toy" || string(c.Gate.Spec) != `{"n": [1, 2.5e3, true, false, null]}` {
		t.Fatalf("gate %+v", c.Gate)
	}
	if c.Name != `a}"{,` || c.Lifecycle != "deployment" || c.Kind != CheckProtection || c.Entity.Name != "[{" {
		t.Fatalf("fields %+v", c)
	}
	var none Check
	if err := json.Unmarshal([]byte(`{"NAME":"n","PollInterval":"1s"}`), &none); err != nil || none.Gate != nil || none.Name != "n" {
		t.Fatalf("fields in another case: %+v, gate %+v, %v", none, none.Gate, err)
	}
}
