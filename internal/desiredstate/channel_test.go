package desiredstate

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wave1 returns the fixture stored in the form before the engine-facing one,
// and its decoded form.
func wave1(t *testing.T) ([]byte, *Compiled) {
	t.Helper()
	raw, err := os.ReadFile("testdata/wave1.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return raw, c
}

// TestDecodeWave1DesiredState: a desired state as drover stored it before
// the engine-facing form (the compiler's result) still decodes, with every
// field the engine works from, so an upgrade loses no desired state.
func TestDecodeWave1DesiredState(t *testing.T) {
	_, c := wave1(t)
	if c.Application != "infra" || c.Service != "vm" || c.Version != "v-0123456789abcdef" || c.BundleName != "vm-42" || c.Graph == nil || len(c.Channels) != 2 {
		t.Fatalf("decoded %+v", c)
	}
	staging, prod := c.Channels[0], c.Channels[1]
	wantStaging := Channel{
		Name: "staging", Runtime: "k8s", RuntimeKind: "kubernetes", Namespace: "web", Backend: "kubernetes",
		Checks: []Check{{Kind: CheckProtection, Name: "slo", Lifecycle: "deployment", Entity: ID{Type: TypeProtectionLink, Name: "infra/vm/staging/protection/releaseChannel/slo/deployment"},
			Source: "releaseChannel", Attachment: "slo"}},
		AutoRollback:     false,
		ProgressDeadline: Duration{90 * time.Second},
		Objects:          staging.Objects,
		Env:              map[string]string{"PLAIN": "1", "TOKEN": "s3cr3t"},
		SecretEnv:        []string{"TOKEN"},
	}
	if !reflect.DeepEqual(staging, wantStaging) {
		t.Errorf("staging:\n got %+v\nwant %+v", staging, wantStaging)
	}
	if len(staging.Objects) != 1 || !strings.Contains(string(staging.Objects[0]), `"Deployment"`) {
		t.Errorf("staging objects = %s", staging.Objects)
	}
	if got := staging.Secrets(); !reflect.DeepEqual(got, []string{"s3cr3t"}) {
		t.Errorf("staging secrets = %q", got)
	}
	wantProd := Channel{
		Name: "prod", Runtime: "vm-runner", RuntimeKind: "custom", Backend: "customRuntime", DependsOn: []string{"staging"},
		Approvals:        []Approval{{Topic: "prod", Description: "ship it", MinApprovers: 2}},
		EveryAction:      true, // requireApprovalBeforeApply
		Checks:           []Check{{Kind: CheckConvergenceExtension, Name: "smoke", Lifecycle: "APPROVAL", Entity: ID{Type: TypeDeliveryExtension, Name: "infra/vm/prod/extension/smoke"}}},
		AutoRollback:     true,
		ConvergenceGrace: Duration{10 * time.Minute},
		Objects:          prod.Objects,
	}
	if !reflect.DeepEqual(prod, wantProd) {
		t.Errorf("prod:\n got %+v\nwant %+v", prod, wantProd)
	}
	if got := prod.Checks[0].String(); got != "convergence extension smoke (APPROVAL)" {
		t.Errorf("check text = %q", got)
	}

	// Re-encoded, it is the current form and decodes to the same thing.
	enc, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Errorf("round trip differs:\n%s\n%s", a, b)
	}
}

func TestDecodeRefusesNewerFormatAndGarbage(t *testing.T) {
	if _, err := Decode([]byte(`{"format": 99}`)); err == nil || !strings.Contains(err.Error(), "upgrade drover") {
		t.Errorf("newer format: %v", err)
	}
	if _, err := Decode([]byte(`not json`)); err == nil {
		t.Error("garbage decoded")
	}
	if _, err := Decode([]byte(`{"format": 2, "channels": [{"progressDeadline": "forever"}]}`)); err == nil {
		t.Error("a bad duration decoded")
	}
}

// TestDecodeWithoutGraph: the engine's decoding leaves the graph out and
// nothing else, for the current form and the one stored before it.
func TestDecodeWithoutGraph(t *testing.T) {
	stored, full := wave1(t)
	current, err := Encode(full)
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string][]byte{"wave 1": stored, "current": current} {
		want, err := Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if want.Graph == nil {
			t.Fatalf("%s: the fixture has no graph", name)
		}
		want.Graph = nil
		got, err := DecodeWithoutGraph(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
	if _, err := DecodeWithoutGraph([]byte(`{"format": 99}`)); err == nil || !strings.Contains(err.Error(), "upgrade drover") {
		t.Errorf("newer format: %v", err)
	}
	if _, err := DecodeWithoutGraph([]byte(`{"format": 2, "graph": [}`)); err == nil {
		t.Error("a broken graph decoded")
	}
}
