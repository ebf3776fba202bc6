package config

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// validTree is a small, valid config tree; test cases add or replace files.
var validTree = map[string]string{
	"shop.pvn.yaml": `application:
  name: shop
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: k8s
      constants:
        - name: replicas
          string: {value: "1"}
      labels:
        - {label: env, value: staging}
    - name: prod
      runtimes:
        - runtime: k8s
      preconditions:
        - releaseChannelStable: {releaseChannel: staging}
        - manualApproval: {}
      protections:
        - ref: {name: window}
          lifecycle:
            - preApproval: {}
`,
	"runtimes/k8s.pvn.yaml": `runtime:
  name: k8s
  kubernetes: {}
  labels:
    - {label: region, value: eu-west-1}
`,
	"services/web.pvn.yaml": `service:
  name: web
  application: shop
  kubernetesConfig:
    type: KUBERNETES
    inlined: "kind: Deployment\n"
  parameters:
    - name: image
      dockerImage:
        imageRegistryInfo: {containerRegistry: ghcr.io, imageRepository: acme/web}
  convergenceExtensions:
    - lifecycle: DEPLOYMENT
      ref: {name: migrate}
`,
	"protections/window.pvn.yaml": `protection:
  name: window
  builtin:
    allowedTimes:
      windows:
        - {days: mon-thu, hours: 9-17, tz: Europe/Paris}
`,
	"extensions/migrate.pvn.yaml": `deliveryExtension:
  name: migrate
  taskConfig:
    program:
      image: migrate
      cmd: [migrate, up]
`,
}

// validateTree writes validTree with changes (an empty value deletes a file)
// into a temporary directory and returns every error of loading, indexing and
// validating it, with the directory removed from file names.
func validateTree(t *testing.T, changes map[string]string) []string {
	t.Helper()
	files := maps.Clone(validTree)
	for name, content := range changes {
		if content == "" {
			delete(files, name)
			continue
		}
		files[name] = content
	}
	dir := writeTree(t, t.TempDir(), files)
	var errs ErrorList
	sources, err := Load([]string{dir + "/..."})
	if err != nil {
		l, ok := AsErrorList(err)
		if !ok {
			t.Fatalf("Load: %v", err)
		}
		errs = l
	} else {
		set, setErrs := NewSet(sources)
		errs = append(errs, setErrs...)
		errs = append(errs, set.Validate()...)
	}
	if err := errs.Err(); err != nil {
		errs, _ = AsErrorList(err)
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = strings.ReplaceAll(e.Error(), filepath.ToSlash(dir)+"/", "")
	}
	return lines
}

func TestValidateValidTree(t *testing.T) {
	t.Parallel()
	if errs := validateTree(t, nil); len(errs) > 0 {
		t.Fatalf("valid tree has errors:\n%s", strings.Join(errs, "\n"))
	}
}

func TestValidateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		changes map[string]string
		want    []string
	}{
		{
			name: "invalid names",
			changes: map[string]string{
				"bad.pvn.yaml":  "runtime:\n  name: Bad_Name\n",
				"dash.pvn.yaml": "runtime:\n  name: trailing-\n",
				"long.pvn.yaml": "runtime:\n  name: a123456789012345678901234567890123456789012345678901234567890123\n",
				"ok.pvn.yaml":   "runtime:\n  name: a12345678901234567890123456789012345678901234567890123456789012\n",
			},
			want: []string{
				"bad.pvn.yaml:2:9: runtime.name: name \"Bad_Name\" is not valid: use lower-case letters, digits and '-', starting with a letter",
				"dash.pvn.yaml:2:9: runtime.name: name \"trailing-\" is not valid: use lower-case letters, digits and '-', starting with a letter",
				"long.pvn.yaml:2:9: runtime.name: name \"a123456789012345678901234567890123456789012345678901234567890123\" is longer than 63 characters",
			},
		},
		{
			// Tour 3's S16: a runtime says which applications may use it.
			name: "runtime of other applications",
			changes: map[string]string{
				"runtimes/k8s.pvn.yaml": "runtime:\n  name: k8s\n  kubernetes: {}\n  applications: [billing, Bad, billing]\n",
			},
			want: []string{
				"runtimes/k8s.pvn.yaml:4:27: runtime.applications[1]: name \"Bad\" is not valid: use lower-case letters, digits and '-', starting with a letter",
				"runtimes/k8s.pvn.yaml:4:32: runtime.applications[2]: application \"billing\" is listed twice",
				"shop.pvn.yaml:6:20: application.releaseChannels[0].runtimes[0].runtime: runtime \"k8s\" may be used only by application(s) billing, Bad, billing (its applications list), not by shop: ask an admin of every application to add shop there, or choose another runtime",
				"shop.pvn.yaml:14:20: application.releaseChannels[1].runtimes[0].runtime: runtime \"k8s\" may be used only by application(s) billing, Bad, billing (its applications list), not by shop: ask an admin of every application to add shop there, or choose another runtime",
			},
		},
		{
			name: "missing required fields",
			changes: map[string]string{
				"services/web.pvn.yaml": "service:\n  parameters:\n    - string: {}\n    - name: tag\n",
				"rt.pvn.yaml":           "runtime:\n  labels:\n    - value: x\n",
			},
			want: []string{
				"rt.pvn.yaml:2:3: runtime.name: name is required",
				"rt.pvn.yaml:3:7: runtime.labels[0].label: label is required",
				"services/web.pvn.yaml:2:3: service.name: name is required",
				"services/web.pvn.yaml:2:3: service.application: application is required",
				"services/web.pvn.yaml:2:3: service: a backend is required: set kubernetesConfig, helm, customRuntime or awsEcs",
				"services/web.pvn.yaml:3:7: service.parameters[0].name: name is required",
				"services/web.pvn.yaml:4:7: service.parameters[1]: set exactly one type: string, int, dockerImage, secret, commit or blob",
			},
		},
		{
			name: "unknown references",
			changes: map[string]string{
				"shop.pvn.yaml": `application:
  name: shop
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: k8z
    - name: prod
      runtimes:
        - runtime: k8s
      preconditions:
        - releaseChannelStable: {releaseChannel: stagin}
      protections:
        - ref: {name: windo}
          lifecycle: [{preApproval: {}}]
`,
				"services/web.pvn.yaml": `service:
  name: web
  application: shopp
  kubernetesConfig: {type: KUBERNETES, inlined: x}
  convergenceExtensions:
    - lifecycle: DEPLOYMENT
      ref: {name: migrat}
    - lifecycle: POST_DEPLOYMENT
      instance: seed
`,
				"runtimes/ext.pvn.yaml": `runtime:
  name: ext
  custom:
    proxyRuntime: {runtime: k9s}
    apply:
      taskConfig: {program: {cmd: [apply]}}
`,
			},
			want: []string{
				"runtimes/ext.pvn.yaml:4:29: runtime.custom.proxyRuntime.runtime: unknown runtime \"k9s\": name a runtime linked with drover runtimes link (whose agent runs the commands) (did you mean \"k8s\"?)",
				"services/web.pvn.yaml:3:16: service.application: unknown application \"shopp\" (did you mean \"shop\"?)",
				"services/web.pvn.yaml:7:19: service.convergenceExtensions[0].ref.name: unknown deliveryExtension \"migrat\" (did you mean \"migrate\"?)",
				"services/web.pvn.yaml:9:17: service.convergenceExtensions[1].instance: unknown convergence extension instance \"seed\" (define it in convergenceExtensionInstances)",
				"shop.pvn.yaml:6:20: application.releaseChannels[0].runtimes[0].runtime: unknown runtime \"k8z\" (did you mean \"k8s\"?)",
				"shop.pvn.yaml:11:50: application.releaseChannels[1].preconditions[0].releaseChannelStable.releaseChannel: unknown release channel \"stagin\" (did you mean \"staging\"?)",
				"shop.pvn.yaml:13:23: application.releaseChannels[1].protections[0].ref.name: unknown protection \"windo\" (did you mean \"window\"?)",
			},
		},
		{
			name: "oneof violations",
			changes: map[string]string{
				"shop.pvn.yaml": `application:
  name: shop
  releaseChannels:
    - name: staging
      runtimes: [{runtime: k8s}]
      preconditions:
        - releaseChannelStable: {releaseChannel: prod}
          manualApproval: {}
        - {}
        - releaseChannelStable: {}
      policy:
        defaultEnv:
          A: {value: x, rawSecret: y}
    - name: prod
      runtimes: [{runtime: k8s}]
`,
				"services/web.pvn.yaml": `service:
  name: web
  application: shop
  kubernetesConfig: {type: KUBERNETES, inlined: x}
  customRuntime: {}
  parameters:
    - name: none
    - name: two
      string: {}
      int: {}
    - name: img
      dockerImage: {}
  env:
    "1BAD": {value: x}
    B: {secret: {key: b}, kubernetesSecret: {secretName: s, key: k}}
`,
				"protections/window.pvn.yaml": "protection:\n  name: window\n",
				"protections/both.pvn.yaml": `protection:
  name: both
  builtin:
    alwaysPassing: {}
    alwaysFailing: {message: no}
`,
				"runtimes/k8s.pvn.yaml": "runtime:\n  name: k8s\n  kubernetes: {}\n  fake: {}\n",
			},
			want: []string{
				"protections/both.pvn.yaml:4:5: protection.builtin: set exactly one of allowedTimes, commitDenylist, alwaysPassing, alwaysFailing",
				"protections/window.pvn.yaml:2:3: protection: set exactly one of taskConfig, kubernetesConfig, builtin",
				"runtimes/k8s.pvn.yaml:2:3: runtime: set only one runtime type (found fake, kubernetes)",
				"services/web.pvn.yaml:5:18: service.customRuntime: set only one backend (found kubernetesConfig and customRuntime)",
				"services/web.pvn.yaml:7:7: service.parameters[0]: set exactly one type: string, int, dockerImage, secret, commit or blob",
				"services/web.pvn.yaml:8:7: service.parameters[1]: set exactly one type: string, int, dockerImage, secret, commit or blob",
				"services/web.pvn.yaml:12:20: service.parameters[2].dockerImage.imageRegistryInfo: imageRegistryInfo with imageRepository is required",
				"services/web.pvn.yaml:14:13: service.env.1BAD: environment variable name \"1BAD\" is not valid",
				"services/web.pvn.yaml:15:8: service.env.B: set only one of value, rawSecret, secret, kubernetesSecret",
				"shop.pvn.yaml:7:11: application.releaseChannels[0].preconditions[0]: set exactly one of releaseChannelStable, manualApproval, sharedManualApproval",
				"shop.pvn.yaml:9:11: application.releaseChannels[0].preconditions[1]: set exactly one of releaseChannelStable, manualApproval, sharedManualApproval",
				"shop.pvn.yaml:10:33: application.releaseChannels[0].preconditions[2].releaseChannelStable: releaseChannel or selector is required",
				"shop.pvn.yaml:13:14: application.releaseChannels[0].policy.defaultEnv.A: set only one of value, rawSecret, secret, kubernetesSecret",
			},
		},
		{
			name: "label queries and templates",
			changes: map[string]string{
				"shop.pvn.yaml": `application:
  name: shop
  releaseChannelGroups:
    - name: regions
      runtimeSelector: "region=(eu"
      template:
        name: "{{.Builtins.Runtime.Name"
        runtimes: [{runtime: "{{.Builtins.Runtime.Name}}"}]
  releaseChannels:
    - name: prod
      runtimes: [{runtime: k8s}]
      preconditions:
        - releaseChannelStable: {selector: "@group="}
`,
				"services/web.pvn.yaml": `service:
  name: web
  application: shop
  bundleName: "{{.Params.image"
  kubernetesConfig:
    type: KUBERNETES
    inlined: x
    patches:
      - replace: {path: spec/replicas, intAsString: "{{ end }}"}
`,
			},
			want: []string{
				"services/web.pvn.yaml:4:15: service.bundleName: invalid template: unclosed action",
				"services/web.pvn.yaml:9:25: service.kubernetesConfig.patches[0].replace.path: path must be a JSON pointer starting with / (e.g. /spec/replicas)",
				"services/web.pvn.yaml:9:53: service.kubernetesConfig.patches[0].replace.intAsString: invalid template: unexpected {{end}}",
				"shop.pvn.yaml:5:24: application.releaseChannelGroups[0].runtimeSelector: label query \"region=(eu\": offset 7: expected a value after \"=\", found \"(\"; to match an empty value write region=\"\"",
				"shop.pvn.yaml:7:15: application.releaseChannelGroups[0].template.name: invalid template: unclosed action",
				"shop.pvn.yaml:13:44: application.releaseChannels[0].preconditions[0].releaseChannelStable.selector: label query \"@group=\": offset 7: expected a value after \"=\", found end of query; to match an empty value write @group=\"\"",
			},
		},
		{
			name: "duplicates",
			changes: map[string]string{
				"shop.pvn.yaml": `application:
  name: shop
  releaseChannels:
    - name: staging
      runtimes: [{runtime: k8s}, {runtime: k8s}]
      constants:
        - {name: a, string: {value: x}}
        - {name: a, string: {value: y}}
      labels:
        - {label: env, value: a}
        - {label: env, value: b}
    - name: staging
      runtimes: [{runtime: k8s}]
`,
				"services/web2.pvn.yaml": strings.Replace(validTree["services/web.pvn.yaml"], "  parameters:\n", "  parameters:\n    - name: image\n      string: {}\n", 1),
			},
			want: []string{
				"services/web2.pvn.yaml:2:9: service.name: duplicate service \"web\" (also defined in services/web.pvn.yaml)",
				"services/web2.pvn.yaml:10:13: service.parameters[1].name: duplicate parameter \"image\"",
				"shop.pvn.yaml:5:34: application.releaseChannels[0].runtimes[1]: duplicate runtime connection \"k8s\": give each connection a distinct name",
				"shop.pvn.yaml:8:18: application.releaseChannels[0].constants[1].name: duplicate constant \"a\"",
				"shop.pvn.yaml:11:19: application.releaseChannels[0].labels[1].label: duplicate label \"env\"",
				"shop.pvn.yaml:12:13: application.releaseChannels[1].name: duplicate release channel \"staging\" (also releaseChannels[0])",
			},
		},
		{
			name: "precondition cycle",
			changes: map[string]string{
				"shop.pvn.yaml": `application:
  name: shop
  releaseChannels:
    - name: a
      runtimes: [{runtime: k8s}]
      preconditions: [{releaseChannelStable: {releaseChannel: c}}]
    - name: b
      runtimes: [{runtime: k8s}]
      preconditions: [{releaseChannelStable: {releaseChannel: a}}]
    - name: c
      runtimes: [{runtime: k8s}]
      preconditions: [{releaseChannelStable: {releaseChannel: b}}, {releaseChannelStable: {releaseChannel: c}}]
`,
			},
			want: []string{
				"shop.pvn.yaml:4:5: application.releaseChannels: release channels wait for each other in a cycle: a -> c -> b -> a",
				"shop.pvn.yaml:12:108: application.releaseChannels[2].preconditions[1].releaseChannelStable.releaseChannel: release channel \"c\" cannot wait for itself",
			},
		},
		{
			name: "standalone release channels",
			changes: map[string]string{
				"rc/canary.pvn.yaml":  "releaseChannel:\n  application: shop\n  name: canary\n  runtimes: [{runtime: k8s}]\n  preconditions: [{releaseChannelStable: {releaseChannel: prd}}]\n",
				"rc/canary2.pvn.yaml": "releaseChannel:\n  application: shop\n  name: canary\n  runtimes: [{runtime: k8s}]\n",
				"rc/prod.pvn.yaml":    "releaseChannel:\n  application: shop\n  name: prod\n  runtimes: [{runtime: k8s}]\n",
				"rc/orphan.pvn.yaml":  "releaseChannel:\n  name: orphan\n  runtimes: [{runtime: k8s}]\n",
				"rc/other.pvn.yaml":   "releaseChannel:\n  application: other\n  name: x\n  runtimes: [{runtime: k8s}]\n",
			},
			want: []string{
				"rc/canary.pvn.yaml:5:59: releaseChannel.preconditions[0].releaseChannelStable.releaseChannel: unknown release channel \"prd\" (did you mean \"prod\"?)",
				"rc/canary2.pvn.yaml:3:9: releaseChannel.name: duplicate release channel \"canary\" (also in rc/canary.pvn.yaml)",
				"rc/orphan.pvn.yaml:2:3: releaseChannel.application: application is required in a standalone releaseChannel file (drover extension: the application it belongs to)",
				"rc/other.pvn.yaml:2:16: releaseChannel.application: unknown application \"other\"",
				"rc/prod.pvn.yaml:3:9: releaseChannel.name: duplicate release channel \"prod\" (also in shop.pvn.yaml)",
			},
		},
		{
			name: "standalone release channels in a cycle with the application",
			changes: map[string]string{
				"rc/canary.pvn.yaml": "releaseChannel:\n  application: shop\n  name: canary\n  runtimes: [{runtime: k8s}]\n  preconditions: [{releaseChannelStable: {releaseChannel: prod}}]\n",
				"shop.pvn.yaml":      strings.Replace(validTree["shop.pvn.yaml"], "releaseChannel: staging", "releaseChannel: canary", 1),
			},
			want: []string{
				"shop.pvn.yaml:4:5: application.releaseChannels: release channels wait for each other in a cycle: canary -> prod -> canary",
			},
		},
		{
			name: "allowed times",
			changes: map[string]string{
				"protections/window.pvn.yaml": `protection:
  name: window
  builtin:
    allowedTimes:
      windows:
        - {days: mon-funday}
        - {hours: 18-9}
        - {tz: Mars/Olympus}
        - {days: "Weekdays", hours: "9-12, 14", tz: europe/paris}
`,
				"protections/empty.pvn.yaml": "protection:\n  name: empty\n  builtin:\n    allowedTimes: {}\n",
			},
			want: []string{
				"protections/empty.pvn.yaml:4:19: protection.builtin.allowedTimes.windows: at least one window is required",
				"protections/window.pvn.yaml:6:11: protection.builtin.allowedTimes.windows[0]: days: unknown day \"funday\"",
				"protections/window.pvn.yaml:7:11: protection.builtin.allowedTimes.windows[1]: hours: range \"18-9\" ends before it starts",
				"protections/window.pvn.yaml:8:11: protection.builtin.allowedTimes.windows[2]: tz: unknown time zone \"Mars/Olympus\"",
			},
		},
		{
			name: "registry hosts and image tags",
			changes: map[string]string{
				"services/web.pvn.yaml": `service:
  name: web
  application: shop
  kubernetesConfig: {type: KUBERNETES, inlined: x}
  parameters:
    - name: a
      dockerImage:
        imageRegistryInfo: {containerRegistry: my-registry, imageRepository: acme/web}
    - name: b
      dockerImage:
        defaultTag: "-bad"
        imageRegistryInfo: {containerRegistry: dockerhub-public, imageRepository: library/nginx}
    - name: c
      dockerImage:
        imageRegistryInfo: {containerRegistry: ghcr.io}
    - name: d
      dockerImage:
        defaultTag: "sha256:0123456789012345678901234567890123456789012345678901234567890123"
        imageRegistryInfo: {containerRegistryId: localhost, imageRepository: x}
`,
			},
			want: []string{
				"services/web.pvn.yaml:8:28: service.parameters[0].dockerImage.imageRegistryInfo: container registry \"my-registry\" is neither a registry host (e.g. ghcr.io, registry.example.com:5000), dockerhub-public, nor a containerRegistry config",
				"services/web.pvn.yaml:11:21: service.parameters[1].dockerImage.defaultTag: invalid image tag \"-bad\"",
				"services/web.pvn.yaml:15:28: service.parameters[2].dockerImage.imageRegistryInfo: imageRegistryInfo with imageRepository is required",
			},
		},
		{
			name: "service references release channels and connections",
			changes: map[string]string{
				"services/web.pvn.yaml": `service:
  name: web
  application: shop
  runtimeConnection: k8z
  perReleaseChannel:
    - releaseChannel: prod
      kubernetesConfig: {type: KUBERNETES, inlined: x}
    - releaseChannel: prd
    - releaseChannel: prod
    - {}
  convergenceExtensionInstances:
    - name: seed
      ref: {name: migrate}
    - name: seed
      ref: {name: migrate}
      inlined: {taskConfig: {program: {cmd: [x]}}}
  convergenceExtensions:
    - instance: seed
    - lifecycle: 1
      inlined: {}
`,
			},
			want: []string{
				"services/web.pvn.yaml:4:22: service.runtimeConnection: no release channel of \"shop\" has a runtime connection named \"k8z\" (did you mean \"k8s\"?)",
				"services/web.pvn.yaml:8:23: service.perReleaseChannel[1].releaseChannel: application \"shop\" has no release channel \"prd\" (did you mean \"prod\"?)",
				"services/web.pvn.yaml:9:23: service.perReleaseChannel[2].releaseChannel: duplicate entry for release channel \"prod\" (also perReleaseChannel[0])",
				"services/web.pvn.yaml:10:7: service.perReleaseChannel[3].releaseChannel: releaseChannel is required",
				"services/web.pvn.yaml:14:7: service.convergenceExtensionInstances[1]: set exactly one of inlined, instance, ref",
				"services/web.pvn.yaml:14:13: service.convergenceExtensionInstances[1].name: duplicate extension instance \"seed\"",
				"services/web.pvn.yaml:18:7: service.convergenceExtensions[0].lifecycle: lifecycle is required: PRE_APPROVAL, APPROVAL, POST_APPROVAL, DEPLOYMENT or POST_DEPLOYMENT",
				"services/web.pvn.yaml:19:18: service.convergenceExtensions[1].lifecycle: lifecycle is required: PRE_APPROVAL, APPROVAL, POST_APPROVAL, DEPLOYMENT or POST_DEPLOYMENT",
				"services/web.pvn.yaml:20:16: service.convergenceExtensions[1].inlined: taskConfig or kubernetesConfig is required",
			},
		},
		{
			name: "custom runtime and protections",
			changes: map[string]string{
				"runtimes/ext.pvn.yaml": `runtime:
  name: ext
  custom:
    proxyRuntime: {}
    apply:
      maxConcurrency: -1
    fetch: {}
    applyId: "{{"
  fake:
    failVersions: "("
`,
				"protections/task.pvn.yaml": `protection:
  name: task
  taskConfig: {}
  kubernetesConfig: {type: KUBERNETES}
`,
				"shop.pvn.yaml": strings.Replace(validTree["shop.pvn.yaml"], "            - preApproval: {}\n", "            - preApproval: {}\n              postApproval: {}\n            - postDeployment: {}\n", 1),
			},
			want: []string{
				"protections/task.pvn.yaml:2:3: protection: set only one of taskConfig and kubernetesConfig",
				"runtimes/ext.pvn.yaml:2:3: runtime: set only one runtime type (found custom, fake)",
				"runtimes/ext.pvn.yaml:4:19: runtime.custom.proxyRuntime.runtime: proxyRuntime.runtime is required",
				"runtimes/ext.pvn.yaml:6:7: runtime.custom.apply: taskConfig or kubernetesConfig is required",
				"runtimes/ext.pvn.yaml:6:23: runtime.custom.apply.maxConcurrency: must not be negative",
				"runtimes/ext.pvn.yaml:7:12: runtime.custom.fetch: taskConfig or kubernetesConfig is required",
				"runtimes/ext.pvn.yaml:8:14: runtime.custom.applyId: invalid template: unclosed action",
				"runtimes/ext.pvn.yaml:10:19: runtime.fake.failVersions: invalid regular expression: error parsing regexp: missing closing ): `(`",
				"shop.pvn.yaml:21:15: application.releaseChannels[1].protections[0].lifecycle[0]: set exactly one of preApproval, postApproval, deployment, postDeployment",
				"shop.pvn.yaml:23:31: application.releaseChannels[1].protections[0].lifecycle[1].postDeployment.checkDuration: checkDuration is required and must be positive",
			},
		},
		{
			name: "kubernetes runtime versions",
			changes: map[string]string{
				"runtimes/k.pvn.yaml": `runtime:
  name: k
  kubernetes:
    kubeVersion: "1.x"
    apiVersions: [monitoring.coreos.com/v1, "not an api version", v1/Pod]
`,
			},
			want: []string{
				"runtimes/k.pvn.yaml:4:18: runtime.kubernetes.kubeVersion: \"1.x\" is not a Kubernetes version (like 1.31 or v1.31.2)",
				"runtimes/k.pvn.yaml:5:45: runtime.kubernetes.apiVersions[1]: \"not an api version\" is not an API version (like monitoring.coreos.com/v1 or monitoring.coreos.com/v1/ServiceMonitor)",
			},
		},
		{
			name: "deploy windows",
			changes: map[string]string{
				"shop.pvn.yaml": strings.Replace(validTree["shop.pvn.yaml"], "      protections:\n", "      deployWindows:\n        - {days: mon-fri, hours: 9-17, tz: europe/berlin}\n        - {days: someday}\n        - {hours: 9-25}\n      protections:\n", 1),
			},
			want: []string{
				"shop.pvn.yaml:20:11: application.releaseChannels[1].deployWindows[1]: days: unknown day \"someday\" (use mon..sun, monday..sunday, weekdays, weekends)",
				"shop.pvn.yaml:21:11: application.releaseChannels[1].deployWindows[2]: hours: \"25\" is not an hour from 0 to 23",
			},
		},
		{
			name: "alert gate",
			changes: map[string]string{
				"shop.pvn.yaml": strings.Replace(validTree["shop.pvn.yaml"], "      protections:\n", "      alertGate:\n        alertmanager: am:9093\n        matchers: ['severity=\"sev1\"', 'sev1']\n        pollInterval: 0.5s\n      protections:\n", 1),
			},
			want: []string{
				"shop.pvn.yaml:19:23: application.releaseChannels[1].alertGate.alertmanager: \"am:9093\" is not an http or https URL",
				"shop.pvn.yaml:20:39: application.releaseChannels[1].alertGate.matchers[1]: \"sev1\" is not a label matcher: name, then =, !=, =~ or !~, then a value (severity=\"sev1\")",
				"shop.pvn.yaml:21:23: application.releaseChannels[1].alertGate.pollInterval: 0.5s is too short: poll and retry intervals must be at least 1s (or 0 for the default)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := validateTree(t, tt.changes)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestValidateListsEveryError mirrors `drover validate` on a tree broken in many
// ways at once: every problem is listed, each with its file, line and column.
func TestValidateListsEveryError(t *testing.T) {
	t.Parallel()
	got := validateTree(t, map[string]string{
		"shop.pvn.yaml": `application:
  name: Shop
  releaseChannels:
    - name: staging
      runtimes: [{runtime: k8s}]
      preconditions: [{releaseChannelStable: {releaseChannel: prod}}]
    - name: prod
      runtimes: [{runtime: gke}]
      preconditions: [{releaseChannelStable: {releaseChannel: staging}}]
      protections:
        - ref: {name: freeze}
          lifecycle: [{preApproval: {}}]
`,
		"services/web.pvn.yaml": `service:
  name: web
  application: shop
  bundleName: "{{"
  kubernetesConfig: {type: KUBERNETES}
  parameters:
    - name: image
      dockerImage:
        imageRegistryInfo: {containerRegistry: corp, imageRepository: web}
    - name: image
      string: {}
  convergenceExtensions:
    - lifecycle: DEPLOYMENT
      ref: {name: migrations}
`,
		"services/api.pvn.yaml": `service:
  name: api
  application: shop
  customRuntime: {}
  env:
    TOKEN: {value: a, rawSecret: b}
`,
		"protections/window.pvn.yaml": `protection:
  name: window
  builtin:
    allowedTimes:
      windows: [{days: someday}]
`,
		"runtimes/k8s.pvn.yaml": `runtime:
  name: k8s
  kubernetes: {}
  labels:
    - {label: "@type", value: x}
    - {label: region, value: "eu west"}
`,
		"rc/canary.pvn.yaml": `releaseChannel:
  application: shop
  name: canary
  runtimes: [{runtime: k8s}]
  preconditions: [{releaseChannelStable: {releaseChannel: qa}}]
`,
	})
	want := []string{
		`protections/window.pvn.yaml:5:17: protection.builtin.allowedTimes.windows[0]: days: unknown day "someday" (use mon..sun, monday..sunday, weekdays, weekends)`,
		`rc/canary.pvn.yaml:2:16: releaseChannel.application: unknown application "shop" (did you mean "Shop"?)`,
		`runtimes/k8s.pvn.yaml:5:15: runtime.labels[0].label: labels starting with @ are set by drover (@type, @name, @id, @group, @application)`,
		`runtimes/k8s.pvn.yaml:6:30: runtime.labels[1].value: label value "eu west" may only hold letters, digits and . - _ @ +`,
		`services/api.pvn.yaml:3:16: service.application: unknown application "shop" (did you mean "Shop"?)`,
		`services/api.pvn.yaml:6:12: service.env.TOKEN: set only one of value, rawSecret, secret, kubernetesSecret`,
		`services/web.pvn.yaml:3:16: service.application: unknown application "shop" (did you mean "Shop"?)`,
		`services/web.pvn.yaml:4:15: service.bundleName: invalid template: unclosed action`,
		`services/web.pvn.yaml:5:21: service.kubernetesConfig: set inlined or local`,
		`services/web.pvn.yaml:9:28: service.parameters[0].dockerImage.imageRegistryInfo: container registry "corp" is neither a registry host (e.g. ghcr.io, registry.example.com:5000), dockerhub-public, nor a containerRegistry config`,
		`services/web.pvn.yaml:10:13: service.parameters[1].name: duplicate parameter "image"`,
		`services/web.pvn.yaml:14:19: service.convergenceExtensions[0].ref.name: unknown deliveryExtension "migrations"`,
		`shop.pvn.yaml:2:9: application.name: name "Shop" is not valid: use lower-case letters, digits and '-', starting with a letter`,
		`shop.pvn.yaml:4:5: application.releaseChannels: release channels wait for each other in a cycle: prod -> staging -> prod`,
		`shop.pvn.yaml:8:28: application.releaseChannels[1].runtimes[0].runtime: unknown runtime "gke"`,
		`shop.pvn.yaml:11:23: application.releaseChannels[1].protections[0].ref.name: unknown protection "freeze"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadListsEveryDecodeError: problems found while reading files are all
// listed too, across files, before anything is validated.
func TestLoadListsEveryDecodeError(t *testing.T) {
	t.Parallel()
	got := validateTree(t, map[string]string{
		"shop.pvn.yaml": `application:
  name: shop
  release_channels:
    - name: staging
      runtimes: [{runtime: k8s}]
      maturity: 3
      labels: {env: staging}
`,
		"services/web.pvn.yaml": `service:
  name: web
  application: shop
  kubernetesConfig:
    type: KUBERNETIS
    local: {path: missing}
  progressDeadline: 10
`,
		"services/api.pvn.yaml": `service:
  name: api
  application: shop
  kubernetesConfig:
    type: KUBERNETES
    local: {path: k8s}
`,
		"runtimes/k8s.pvn.yaml": "runtime:\n  name: k8s\n  kubernetes: {}\n---\nruntime:\n  name: k9s\n",
		"broken.pvn.yaml":       "service: {name: x\n",
	})
	want := []string{
		`broken.pvn.yaml:1:1: invalid YAML: did not find expected ',' or '}'`,
		`runtimes/k8s.pvn.yaml:5:1: more than one YAML document: put each config in its own file`,
		`services/api.pvn.yaml:6:12: service.kubernetesConfig.local: stat services/k8s: no such file or directory`,
		`services/web.pvn.yaml:5:11: service.kubernetesConfig.type: invalid value "KUBERNETIS": expected one of UNKNOWN, KUBERNETES, KUSTOMIZE (did you mean KUBERNETES?)`,
		`services/web.pvn.yaml:6:12: service.kubernetesConfig.local: stat services/missing: no such file or directory`,
		`services/web.pvn.yaml:7:21: service.progressDeadline: expected a duration such as "30s", got an integer (quote it: "10")`,
		`shop.pvn.yaml:6:7: application.releaseChannels[0].maturity: not supported yet: maturity`,
		`shop.pvn.yaml:7:15: application.releaseChannels[0].labels: expected a list, got a mapping`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestValidateHintIsDeterministic(t *testing.T) {
	t.Parallel()
	// Equally close candidates: the first in sorted order wins, every time.
	if got := hint("k8s-d", []string{"k8s-c", "k8s-b", "k8s-a"}); got != ` (did you mean "k8s-a"?)` {
		t.Errorf("hint = %q", got)
	}
	changes := map[string]string{
		"runtimes/k8s.pvn.yaml":   "runtime:\n  name: k8s-c\n  fake: {}\n",
		"runtimes/k8s-a.pvn.yaml": "runtime:\n  name: k8s-a\n  fake: {}\n",
		"runtimes/k8s-b.pvn.yaml": "runtime:\n  name: k8s-b\n  fake: {}\n",
		"shop.pvn.yaml":           "application:\n  name: shop\n  releaseChannels:\n    - name: prod\n      runtimes: [{runtime: k8s-d}]\n",
		"services/web.pvn.yaml":   "",
	}
	want := []string{`shop.pvn.yaml:5:28: application.releaseChannels[0].runtimes[0].runtime: unknown runtime "k8s-d" (did you mean "k8s-a"?)`}
	for range 5 {
		if got := validateTree(t, changes); !reflect.DeepEqual(got, want) {
			t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// An ECS runtime needs a region and a cluster, one kind of credentials,
// and polls no faster than once a second; a service's ECS definitions
// are templates.
func TestValidateECS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rt.pvn.yaml", `runtime:
  name: ecs
  awsEcs:
    region: mars-1
    pollInterval: 100ms
    accessKey:
      awsAccessKeyId: AKIA
      awsSecretAccessKey:
        secret: {key: aws}
    inheritRoleFromRuntimeEnv: {}
`)
	write("svc.pvn.yaml", `service:
  name: web
  application: shop
  awsEcs:
    taskDefinition:
      inlined: '{"family": "{{.Params.image"}'
`)
	write("app.pvn.yaml", "application:\n  name: shop\n  releaseChannels:\n    - name: prod\n      runtimes:\n        - runtime: ecs\n")
	sources, errs, err := LoadPartial([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) > 0 {
		set, serrs := NewSet(sources)
		errs = append(errs, serrs...)
		if set != nil {
			errs = append(errs, set.Validate()...)
		}
	}
	got := errs.Err().Error()
	for _, want := range []string{
		`runtime.awsEcs.accessKey.awsSecretAccessKey.secret: key and version are required`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	// Without the reference, the rest is checked.
	write("rt.pvn.yaml", `runtime:
  name: ecs
  awsEcs:
    region: mars-1
    pollInterval: 100ms
    accessKey:
      awsAccessKeyId: AKIA
      awsSecretAccessKey: {}
    inheritRoleFromRuntimeEnv: {}
`)
	sources, err = Load([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	set, serrs := NewSet(sources)
	errs = append(ErrorList{}, serrs...)
	errs = append(errs, set.Validate()...)
	got = errs.Err().Error()
	for _, want := range []string{
		`runtime.awsEcs.region: "mars-1" is not an AWS region`,
		`runtime.awsEcs.ecsCluster: ecsCluster is required`,
		`runtime.awsEcs: set only one of accessKey and inheritRoleFromRuntimeEnv`,
		`runtime.awsEcs.accessKey.awsSecretAccessKey: secret (a stored secret: drover secrets set) or rawSecret is required`,
		`runtime.awsEcs.pollInterval: `,
		`service.awsEcs.taskDefinition.inlined: `,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
}

// An AWS Lambda runtime (drover's kind) needs a region and one kind of
// credentials; a Lambda service needs a function and one kind of code,
// and its zip is read client-side.
func TestValidateLambda(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rt.pvn.yaml", `runtime:
  name: fn
  awsLambda:
    region: mars-1
    pollInterval: 100ms
    accessKey:
      awsAccessKeyId: AKIA
      awsSecretAccessKey: {}
    inheritRoleFromRuntimeEnv: {}
`)
	write("svc.pvn.yaml", `service:
  name: web
  application: shop
  awsLambda:
    function:
      inlined: '{}'
    code:
      zip:
        local:
          path: app.zip
      imageUri: repo/web:1
    alias: "123"
    routingConfig:
      previousVersionPercent: 100
`)
	write("app.zip", "PK\x03\x04zip")
	write("app.pvn.yaml", "application:\n  name: shop\n  releaseChannels:\n    - name: prod\n      runtimes:\n        - runtime: fn\n")
	sources, err := Load([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	set, serrs := NewSet(sources)
	errs := append(ErrorList{}, serrs...)
	errs = append(errs, set.Validate()...)
	got := errs.Err().Error()
	for _, want := range []string{
		`runtime.awsLambda.region: "mars-1" is not an AWS region`,
		`runtime.awsLambda: set only one of accessKey and inheritRoleFromRuntimeEnv`,
		`runtime.awsLambda.accessKey.awsSecretAccessKey: secret (a stored secret: drover secrets set) or rawSecret is required`,
		`runtime.awsLambda.pollInterval: 0.1s is too short`,
		`service.awsLambda.code: set only one of zip and imageUri`,
		`service.awsLambda.alias: "123" is not a Lambda alias name`,
		`service.awsLambda.routingConfig.previousVersionPercent: a share of invocations in percent, 1 to 99`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	var zip string
	for _, src := range sources {
		if svc := src.File.Service; svc != nil {
			zip = svc.AwsLambda.Code.Zip.Base64
		}
	}
	if zip != "UEsDBHppcA==" {
		t.Errorf("the zip as read: %q", zip)
	}
	// A file that is no zip is refused where it is named.
	write("app.zip", "not a zip")
	if _, err := Load([]string{dir + "/..."}); err == nil || !strings.Contains(err.Error(), "service.awsLambda.code.zip.local: app.zip is not a zip file") {
		t.Errorf("a zip that is not one: %v", err)
	}
}
