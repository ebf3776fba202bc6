package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeErrors decodes src and returns its error lines, failing when it succeeds.
func decodeErrors(t *testing.T, src string) []string {
	t.Helper()
	d, err := Decode("f.pvn.yaml", []byte(src))
	if err == nil {
		t.Fatalf("Decode succeeded, want an error; got %+v", d.File)
	}
	l, ok := AsErrorList(err)
	if !ok {
		t.Fatalf("error %v (%T) carries no located errors", err, err)
	}
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return lines
}

func mustDecode(t *testing.T, src string) *Decoded {
	t.Helper()
	d, err := Decode("f.pvn.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return d
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "empty file",
			src:  "",
			want: []string{"f.pvn.yaml:1:1: empty file: expected one of application, service, runtime, protection, deliveryExtension, releaseChannel, containerRegistry, webhook"},
		},
		{
			name: "comments only",
			src:  "# nothing here\n",
			want: []string{"f.pvn.yaml:1:1: empty file: expected one of application, service, runtime, protection, deliveryExtension, releaseChannel, containerRegistry, webhook"},
		},
		{
			name: "syntax error",
			src:  "service:\n  name: a\n   application: b\n",
			want: []string{"f.pvn.yaml:3:1: invalid YAML: mapping values are not allowed in this context"},
		},
		{
			name: "top level list",
			src:  "- service: {}\n",
			want: []string{"f.pvn.yaml:1:1: expected a mapping, got a list"},
		},
		{
			name: "no kind",
			src:  "serviceMetadata:\n  description: x\n",
			want: []string{"f.pvn.yaml:1:1: no config kind: expected exactly one of application, service, runtime, protection, deliveryExtension, releaseChannel, containerRegistry, webhook"},
		},
		{
			name: "two kinds",
			src:  "application:\n  name: a\nservice:\n  name: b\n",
			want: []string{"f.pvn.yaml:1:1: more than one config kind (application, service): put each in its own file"},
		},
		{
			name: "application metadata beside service",
			src:  "service:\n  name: a\napplicationMetadata:\n  description: x\n",
			want: []string{"f.pvn.yaml:1:1: applicationMetadata: allowed only beside application"},
		},
		{
			name: "service metadata beside runtime",
			src:  "runtime:\n  name: a\nserviceMetadata:\n  description: x\n",
			want: []string{"f.pvn.yaml:1:1: serviceMetadata: allowed only beside service"},
		},
		{
			name: "second document",
			src:  "application:\n  name: a\n---\nservice:\n  name: b\n",
			want: []string{"f.pvn.yaml:4:1: more than one YAML document: put each config in its own file"},
		},
		{
			name: "syntax error in second document",
			src:  "application:\n  name: a\n---\nservice: [\n",
			want: []string{"f.pvn.yaml:4:1: invalid YAML: did not find expected node content"},
		},
		{
			name: "unknown top-level key lists the kinds",
			src:  "servise:\n  name: a\n",
			want: []string{`f.pvn.yaml:1:1: servise: unknown field "servise" (did you mean "service"?)`},
		},
		//nolint:misspell // deliberate typo: the test checks the suggestion for it
		{
			name: "unknown key with suggestion",
			src:  "service:\n  name: a\n  aplication: b\n",
			want: []string{`f.pvn.yaml:3:3: service.aplication: unknown field "aplication" (did you mean "application"?)`},
		},
		//nolint:misspell // deliberate typo: the test checks the suggestion for it
		{
			name: "unknown snake_case key suggests the canonical key",
			src:  "service:\n  name: a\n  runtime_conection: b\n",
			want: []string{`f.pvn.yaml:3:3: service.runtime_conection: unknown field "runtime_conection" (did you mean "runtimeConnection"?)`},
		},
		{
			name: "unknown key in a small struct lists the keys",
			src:  "service:\n  name: a\n  autoRollback:\n    nope: true\n",
			want: []string{`f.pvn.yaml:4:5: service.autoRollback.nope: unknown field "nope" (expected one of disabled)`},
		},
		{
			name: "number where a string is expected",
			src:  "service:\n  name: a\n  application: 1.10\n",
			want: []string{`f.pvn.yaml:3:16: service.application: expected a string, got a number (quote it: "1.10")`},
		},
		{
			name: "boolean where a string is expected",
			src:  "runtime:\n  name: yes-it-is\n  labels:\n    - label: enabled\n      value: true\n",
			want: []string{`f.pvn.yaml:5:14: runtime.labels[0].value: expected a string, got a boolean (quote it: "true")`},
		},
		{
			name: "null where a string is expected",
			src:  "service:\n  name:\n",
			want: []string{"f.pvn.yaml:2:8: service.name: expected a string, got null"},
		},
		{
			name: "mapping where a list is expected",
			src:  "runtime:\n  name: a\n  labels: {env: prod}\n",
			want: []string{"f.pvn.yaml:3:11: runtime.labels: expected a list, got a mapping"},
		},
		{
			name: "list where a mapping is expected",
			src:  "service:\n  name: a\n  env: [A]\n",
			want: []string{"f.pvn.yaml:3:8: service.env: expected a mapping, got a list"},
		},
		{
			name: "string where a struct is expected",
			src:  "service:\n  name: a\n  kubernetesConfig: deploy.yaml\n",
			want: []string{"f.pvn.yaml:3:21: service.kubernetesConfig: expected a mapping, got a string"},
		},
		{
			name: "bool",
			src:  "application:\n  name: a\n  noCleanupOnDelete: \"true\"\n",
			want: []string{"f.pvn.yaml:3:22: application.noCleanupOnDelete: expected true or false, got a string"},
		},
		{
			name: "explicitly tagged bool",
			src:  "application:\n  name: a\n  noCleanupOnDelete: !!bool yes\n",
			want: []string{`f.pvn.yaml:3:22: application.noCleanupOnDelete: expected true or false, got "yes"`},
		},
		{
			name: "int32 given as string",
			src:  "runtime:\n  name: a\n  custom:\n    apply:\n      maxConcurrency: \"3\"\n",
			want: []string{"f.pvn.yaml:5:23: runtime.custom.apply.maxConcurrency: expected an integer, got a string"},
		},
		{
			name: "int32 out of range",
			src:  "runtime:\n  name: a\n  custom:\n    apply:\n      maxConcurrency: 3000000000\n",
			want: []string{"f.pvn.yaml:5:23: runtime.custom.apply.maxConcurrency: integer 3000000000 out of range"},
		},
		{
			name: "int32 with a bogus explicit tag",
			src:  "runtime:\n  name: a\n  custom:\n    apply:\n      maxConcurrency: !!int many\n",
			want: []string{`f.pvn.yaml:5:23: runtime.custom.apply.maxConcurrency: expected an integer, got "many"`},
		},
		{
			name: "int64 not a number",
			src:  "service:\n  name: a\n  parameters:\n    - name: n\n      int:\n        defaultValue: ten\n",
			want: []string{`f.pvn.yaml:6:23: service.parameters[0].int.defaultValue: expected an integer, got "ten"`},
		},
		{
			name: "int64 float",
			src:  "service:\n  name: a\n  parameters:\n    - name: n\n      int:\n        defaultValue: 1.5\n",
			want: []string{"f.pvn.yaml:6:23: service.parameters[0].int.defaultValue: expected an integer, got a number"},
		},
		{
			name: "enum typo",
			src:  "service:\n  name: a\n  kubernetesConfig:\n    type: KUSTOMISE\n",
			want: []string{`f.pvn.yaml:4:11: service.kubernetesConfig.type: invalid value "KUSTOMISE": expected one of UNKNOWN, KUBERNETES, KUSTOMIZE (did you mean KUSTOMIZE?)`},
		},
		{
			name: "enum index out of range",
			src:  "service:\n  name: a\n  kubernetesConfig:\n    type: 3\n",
			want: []string{"f.pvn.yaml:4:11: service.kubernetesConfig.type: expected one of UNKNOWN, KUBERNETES, KUSTOMIZE, got an integer"},
		},
		{
			name: "enum lower case is not accepted",
			src:  "service:\n  name: a\n  convergenceExtensions:\n    - lifecycle: deployment\n",
			want: []string{`f.pvn.yaml:4:18: service.convergenceExtensions[0].lifecycle: invalid value "deployment": expected one of UNKNOWN_TASK_LIFECYCLE, CONVERGENCE_START, PRE_APPROVAL, APPROVAL, POST_APPROVAL, DEPLOYMENT, POST_DEPLOYMENT (did you mean DEPLOYMENT?)`},
		},
		{
			name: "duration as a number",
			src:  "protection:\n  name: a\n  timeout: 30\n",
			want: []string{`f.pvn.yaml:3:12: protection.timeout: expected a duration such as "30s", got an integer (quote it: "30")`},
		},
		{
			name: "duration garbage",
			src:  "protection:\n  name: a\n  timeout: soon\n",
			want: []string{`f.pvn.yaml:3:12: protection.timeout: invalid duration "soon": want seconds like "30s" or a Go duration like "5m"`},
		},
		{
			name: "duration negative",
			src:  "protection:\n  name: a\n  timeout: -5m\n",
			want: []string{`f.pvn.yaml:3:12: protection.timeout: invalid duration "-5m": must not be negative`},
		},
		{
			name: "duration NaN",
			src:  "protection:\n  name: a\n  timeout: NaNs\n",
			want: []string{`f.pvn.yaml:3:12: protection.timeout: invalid duration "NaNs": want seconds like "30s" or a Go duration like "5m"`},
		},
		{
			name: "duration overflow",
			src:  "protection:\n  name: a\n  timeout: 99999999999999999999s\n",
			want: []string{`f.pvn.yaml:3:12: protection.timeout: invalid duration "99999999999999999999s": want seconds like "30s" or a Go duration like "5m"`},
		},
		{
			name: "unsupported field",
			src:  "service:\n  name: a\n  fly:\n    taskDefinition: x\n",
			want: []string{"f.pvn.yaml:3:3: service.fly: not supported yet: fly"},
		},
		{
			name: "unsupported snake_case field",
			src:  "service:\n  name: a\n  release_strategy: {}\n",
			want: []string{"f.pvn.yaml:3:3: service.releaseStrategy: not supported yet: releaseStrategy"},
		},
		{
			name: "unsupported top-level recipe",
			src:  "recipe:\n  name: a\n",
			want: []string{"f.pvn.yaml:1:1: recipe: not supported yet: recipe"},
		},
		{
			name: "internal field",
			src:  "service:\n  name: a\n  kubernetesConfig:\n    type: KUBERNETES\n    tree:\n      root: x\n",
			want: []string{"f.pvn.yaml:5:5: service.kubernetesConfig.tree: tree is set by drover and cannot be written in a config file"},
		},
		{
			name: "duplicate key",
			src:  "service:\n  name: a\n  name: b\n",
			want: []string{"f.pvn.yaml:3:3: service.name: duplicate field (first set on line 2)"},
		},
		{
			name: "duplicate via snake_case",
			src:  "service:\n  name: a\n  bundleName: x\n  bundle_name: y\n",
			want: []string{"f.pvn.yaml:4:3: service.bundleName: duplicate field (first set on line 3)"},
		},
		{
			name: "duplicate via deprecated alias",
			src:  "service:\n  name: a\n  kubernetesConfig: {type: KUBERNETES}\n  externalConfig: {type: KUBERNETES}\n",
			want: []string{"f.pvn.yaml:4:3: service.kubernetesConfig: duplicate field (first set on line 3)"},
		},
		{
			name: "duplicate map key",
			src:  "service:\n  name: a\n  env:\n    A: {value: x}\n    A: {value: y}\n",
			want: []string{`f.pvn.yaml:5:5: service.env.A: duplicate key "A"`},
		},
		{
			name: "non-scalar key",
			src:  "service:\n  name: a\n  ? [x]\n  : y\n",
			want: []string{"f.pvn.yaml:3:5: service: keys must be strings"},
		},
		{
			name: "error in a nested list item",
			src: `application:
  name: a
  releaseChannels:
    - name: staging
      preconditions:
        - manualApproval:
            minApprovers: two
`,
			want: []string{"f.pvn.yaml:7:27: application.releaseChannels[0].preconditions[0].manualApproval.minApprovers: expected an integer, got a string"},
		},
		{
			name: "error inside an env map value",
			src:  "service:\n  name: a\n  env:\n    TOKEN:\n      secret: {key: t, versio: 2}\n",
			want: []string{`f.pvn.yaml:5:24: service.env.TOKEN.secret.versio: unknown field "versio" (did you mean "version"?)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decodeErrors(t, tt.src)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// aliasBomb is a small file whose aliases expand to n*n*n parameter values.
func aliasBomb(n int) string {
	list := func(item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+", ", n), ", ") + "]"
	}
	return "service:\n  name: a\n  application: b\n" +
		"  customRuntime: {parameterValues: [&v {name: a, string: b}]}\n" +
		"  bundleName: &vs " + list("*v") + "\n" +
		"  convergenceExtensions: &e " + list("{lifecycle: DEPLOYMENT, ref: {name: x, parameters: *vs}}") + "\n" +
		"  perReleaseChannel: " + list("{releaseChannel: a, convergenceExtensions: *e}") + "\n"
}

func TestDecodeAliasBombIsBounded(t *testing.T) {
	t.Parallel()
	src := aliasBomb(100) // a million parameter values if expanded
	_, err := Decode("f.pvn.yaml", []byte(src))
	l, ok := AsErrorList(err)
	if !ok {
		t.Fatalf("Decode: %v, want located errors", err)
	}
	if limit := maxDecodeSteps(len(src)); len(l) > limit {
		t.Errorf("%d errors, want at most %d", len(l), limit)
	}
	if !strings.Contains(err.Error(), "too many values: YAML anchors and aliases expand this file too much") {
		t.Errorf("error does not explain the alias expansion:\n%.500s", err)
	}
}

func TestDecodeAliasesWithinBudget(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, `service:
  name: web
  application: shop
  env: &env
    A: {value: "1"}
  perReleaseChannel:
    - releaseChannel: staging
      env: *env
    - releaseChannel: prod
      env: *env
`)
	for i, prc := range d.File.Service.PerReleaseChannel {
		if prc.Env["A"].Value != "1" {
			t.Errorf("perReleaseChannel[%d].env = %v, want the aliased env", i, prc.Env)
		}
	}
}

func TestDecodeReportsAllErrorsSorted(t *testing.T) {
	t.Parallel()
	//nolint:misspell // deliberate typo: the test checks the suggestion for it
	src := `service:
  name: 5
  aplication: shop
  fly: {}
  progressDeadline: later
  kubernetesConfig:
    type: KUSTOMISE
    tree: {}
  parameters:
    - name: x
      required: "yes"
`
	//nolint:misspell // deliberate typo: the test checks the suggestion for it
	want := []string{
		`f.pvn.yaml:2:9: service.name: expected a string, got an integer (quote it: "5")`,
		`f.pvn.yaml:3:3: service.aplication: unknown field "aplication" (did you mean "application"?)`,
		`f.pvn.yaml:4:3: service.fly: not supported yet: fly`,
		`f.pvn.yaml:5:21: service.progressDeadline: invalid duration "later": want seconds like "30s" or a Go duration like "5m"`,
		`f.pvn.yaml:7:11: service.kubernetesConfig.type: invalid value "KUSTOMISE": expected one of UNKNOWN, KUBERNETES, KUSTOMIZE (did you mean KUSTOMIZE?)`,
		`f.pvn.yaml:8:5: service.kubernetesConfig.tree: tree is set by drover and cannot be written in a config file`,
		`f.pvn.yaml:11:17: service.parameters[0].required: expected true or false, got a string`,
	}
	got := decodeErrors(t, src)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecodeErrorStructure(t *testing.T) {
	t.Parallel()
	_, err := Decode("dir/app.pvn.yaml", []byte("service:\n  name: a\n  bogus: 1\n"))
	l, ok := AsErrorList(err)
	if !ok || len(l) != 1 {
		t.Fatalf("Decode error = %v, want one located error", err)
	}
	want := &Error{File: "dir/app.pvn.yaml", Line: 3, Column: 3, Field: "service.bogus", Msg: `unknown field "bogus"`}
	if got := l[0]; !strings.HasPrefix(got.Msg, want.Msg) || got.File != want.File || got.Line != want.Line || got.Column != want.Column || got.Field != want.Field {
		t.Errorf("error = %+v, want %+v", got, want)
	}
}

func TestDecodeInternalAllowsTree(t *testing.T) {
	t.Parallel()
	src := "service:\n  name: a\n  application: b\n  kubernetesConfig:\n    type: KUSTOMIZE\n    tree:\n      root: k8s\n      subPath: overlays/{{.Builtins.ReleaseChannel.Name}}\n      files:\n        base/kustomization.yaml: \"resources: []\\n\"\n"
	if _, err := Decode("f.pvn.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "tree is set by drover") {
		t.Errorf("Decode error = %v, want tree rejected", err)
	}
	d, err := DecodeInternal("f.pvn.yaml", []byte(src))
	if err != nil {
		t.Fatalf("DecodeInternal: %v", err)
	}
	want := &FileTree{Root: "k8s", SubPath: "overlays/{{.Builtins.ReleaseChannel.Name}}", Files: map[string]string{"base/kustomization.yaml": "resources: []\n"}}
	if got := d.File.Service.KubernetesConfig.Tree; !reflect.DeepEqual(got, want) {
		t.Errorf("tree = %+v, want %+v", got, want)
	}
	// Unsupported fields stay errors for internal input too.
	if _, err := DecodeInternal("f.pvn.yaml", []byte("service:\n  name: a\n  fly: {}\n")); err == nil {
		t.Error("DecodeInternal accepted an unsupported field")
	}
}

func TestDecodeSnakeCaseAndAliases(t *testing.T) {
	t.Parallel()
	svc := mustDecode(t, `service:
  name: web
  application: shop
  runtime_connection: main
  no_cleanup_on_delete: true
  externalConfig:
    type: KUBERNETES
    inlined: "kind: ConfigMap"
    env_injection_mode: ENV_INJECT_DISABLED
  deliveryExtensions:
    - lifecycle: DEPLOYMENT
      instance: migrate
  deliveryExtensionInstances:
    - name: migrate
      ref: {name: migrate}
  per_release_channel:
    - release_channel: prod
      runtimeExtension:
        parameter_values:
          - name: size
            int: 3
`).File.Service
	if svc.RuntimeConnection != "main" || !svc.NoCleanupOnDelete {
		t.Errorf("snake_case fields not decoded: %+v", svc)
	}
	if kc := svc.KubernetesConfig; kc == nil || kc.Type != KubernetesTypeKubernetes || kc.Inlined != "kind: ConfigMap" || kc.EnvInjectionMode != EnvInjectDisabled {
		t.Errorf("externalConfig = %+v, want kubernetesConfig", kc)
	}
	if len(svc.ConvergenceExtensions) != 1 || svc.ConvergenceExtensions[0].Instance != "migrate" {
		t.Errorf("deliveryExtensions = %+v, want convergenceExtensions", svc.ConvergenceExtensions)
	}
	if len(svc.ConvergenceExtensionInstances) != 1 || svc.ConvergenceExtensionInstances[0].Ref.Name != "migrate" {
		t.Errorf("deliveryExtensionInstances = %+v", svc.ConvergenceExtensionInstances)
	}
	prc := svc.PerReleaseChannel[0]
	if prc.ReleaseChannel != "prod" || prc.CustomRuntime == nil || *prc.CustomRuntime.ParameterValues[0].Int != 3 {
		t.Errorf("perReleaseChannel = %+v", prc)
	}

	rt := mustDecode(t, `runtime:
  name: ext
  extension:
    debug:
      task_config:
        program: {cmd: [info]}
    apply:
      taskConfig:
        program: {cmd: [apply]}
`).File.Runtime
	if rt.Custom == nil || rt.Custom.GetInfo == nil || rt.Custom.GetInfo.TaskConfig.Program.Cmd[0] != "info" {
		t.Errorf("extension/debug aliases not decoded: %+v", rt.Custom)
	}
}

func TestDecodeValues(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, `application:
  name: shop
  releaseChannels:
    - name: prod
      runtimes:
        - runtime: k8s
          type: 1
      preconditions:
        - manualApproval:
        - releaseChannelStable: {releaseChannel: staging}
      protections:
        - ref: {name: window}
          lifecycle:
            - preApproval: {}
            - deployment: {failureBehavior: 2}
            - postDeployment: {checkDuration: 10m, delayCheckDuration: "1.5s"}
applicationMetadata:
  description: the shop
`)
	app := d.File.Application
	if d.File.ApplicationMetadata == nil || d.File.ApplicationMetadata.Description != "the shop" {
		t.Errorf("applicationMetadata = %+v", d.File.ApplicationMetadata)
	}
	rc := app.ReleaseChannels[0]
	if got := rc.Runtimes[0].Type; got != RuntimeTypeLongLivedCompute {
		t.Errorf("type by index = %q, want LONG_LIVED_COMPUTE", got)
	}
	if rc.Preconditions[0].ManualApproval == nil {
		t.Error("`manualApproval:` with no value decoded as nil, want an empty approval")
	}
	if rc.Preconditions[1].ManualApproval != nil || rc.Preconditions[1].ReleaseChannelStable.ReleaseChannel != "staging" {
		t.Errorf("preconditions[1] = %+v", rc.Preconditions[1])
	}
	lc := rc.Protections[0].Lifecycle
	if lc[0].PreApproval == nil || lc[1].Deployment.FailureBehavior != "FAIL" {
		t.Errorf("lifecycle = %+v", lc)
	}
	if pd := lc[2].PostDeployment; pd.CheckDuration.Duration != 10*time.Minute || pd.DelayCheckDuration.Duration != 1500*time.Millisecond {
		t.Errorf("postDeployment = %+v", pd)
	}
}

func TestDecodeScalarForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  int64
	}{
		{"42", 42},
		{`"42"`, 42},
		{`" 7 "`, 7},
		{"-3", -3},
		{"0x10", 16},
		{"1_000", 1000},
		{`"9223372036854775807"`, 9223372036854775807},
	}
	for _, tt := range tests {
		src := "service:\n  name: a\n  parameters:\n    - name: n\n      int:\n        defaultValue: " + tt.value + "\n"
		got := mustDecode(t, src).File.Service.Parameters[0].Int.DefaultValue
		if got == nil || int64(*got) != tt.want {
			t.Errorf("defaultValue: %s = %v, want %d", tt.value, got, tt.want)
		}
	}

	durations := []struct {
		value string
		want  time.Duration
	}{
		{"30s", 30 * time.Second},
		{"86400s", 24 * time.Hour},
		{`"1.5s"`, 1500 * time.Millisecond},
		{"5m", 5 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"0.000000001s", 1},
	}
	for _, tt := range durations {
		src := "protection:\n  name: a\n  pollInterval: " + tt.value + "\n"
		if got := mustDecode(t, src).File.Protection.PollInterval.Duration; got != tt.want {
			t.Errorf("pollInterval: %s = %v, want %v", tt.value, got, tt.want)
		}
	}

	// Enums accept the name or the proto index.
	for value, want := range map[string]KubernetesConfigType{"KUBERNETES": "KUBERNETES", "1": "KUBERNETES", "2": "KUSTOMIZE", "0": "UNKNOWN", `""`: ""} {
		src := "service:\n  name: a\n  kubernetesConfig:\n    type: " + value + "\n"
		if got := mustDecode(t, src).File.Service.KubernetesConfig.Type; got != want {
			t.Errorf("type: %s = %q, want %q", value, got, want)
		}
	}
}

func TestDecodeNullValues(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, `protection:
  name: always
  builtin:
    alwaysPassing:
  parameters:
  env:
`)
	p := d.File.Protection
	if p.Builtin.AlwaysPassing == nil {
		t.Error("`alwaysPassing:` decoded as nil")
	}
	if p.Parameters != nil || p.Env != nil {
		t.Errorf("null list/map decoded as %v / %v, want nil", p.Parameters, p.Env)
	}
	// A null for a non-struct pointer leaves it unset.
	d = mustDecode(t, "service:\n  name: a\n  parameters:\n    - name: n\n      int:\n        defaultValue:\n")
	if v := d.File.Service.Parameters[0].Int.DefaultValue; v != nil {
		t.Errorf("defaultValue: null = %v, want nil", *v)
	}
}

func TestDecodePositions(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, `service:
  name: web
  parameters:
    - name: image
      required: true
  env:
    A: {value: x}
`)
	tests := map[string]Position{
		"service":                     {2, 3},
		"service.name":                {2, 9},
		"service.parameters":          {4, 5},
		"service.parameters[0].name":  {4, 13},
		"service.parameters[0].other": {4, 7}, // nearest ancestor
		"service.env.A.value":         {7, 16},
		"service.application":         {2, 3},
		"nothing.here":                {1, 1},
	}
	for path, want := range tests {
		if got := d.Locate(path); got != want {
			t.Errorf("Locate(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestDecodeJSONInput(t *testing.T) {
	t.Parallel()
	// JSON is YAML: a config drover marshalled decodes back to the same value.
	d := mustDecode(t, `service:
  name: web
  application: shop
  progressDeadline: 10m
  parameters:
    - name: replicas
      int: {defaultValue: 3}
  kubernetesConfig:
    type: KUBERNETES
    inlined: "kind: ConfigMap\n"
`)
	raw, err := json.Marshal(d.File)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeInternal("f.json", raw)
	if err != nil {
		t.Fatalf("DecodeInternal(%s): %v", raw, err)
	}
	if !reflect.DeepEqual(back.File, d.File) {
		t.Errorf("round trip through %s:\n got %+v\nwant %+v", raw, back.File.Service, d.File.Service)
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	keys := []string{"application", "name", "parameters", "runtimeConnection"}
	//nolint:misspell // deliberate typo: the test checks the suggestion for it
	tests := map[string]string{
		"aplication":         "application",
		"Name":               "name",
		"runtime_connection": "runtimeConnection",
		"paramters":          "parameters",
		"xyz":                "",
		"completelyoff":      "",
	}
	for in, want := range tests {
		if got := suggest(in, keys); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCamelCase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"runtime_connection": "runtimeConnection",
		"a__b":               "aB",
		"already":            "already",
		"trailing_":          "trailing",
		"image_registry_id":  "imageRegistryId",
	} {
		if got := camelCase(in); got != want {
			t.Errorf("camelCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDecodeTrailingEmptyDocument(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"---\napplication:\n  name: a\n",
		"application:\n  name: a\n---\n",
		"application:\n  name: a\n---\n# nothing more\n",
		"application:\n  name: a\n...\n",
	} {
		if d := mustDecode(t, src); d.File.Application == nil || d.File.Application.Name != "a" {
			t.Errorf("%q decoded as %+v", src, d.File)
		}
	}
}
