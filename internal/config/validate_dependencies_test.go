package config

import (
	"slices"
	"testing"
)

// dbService and apiService are two more services of shop for the tests of
// service.dependsOn.
const dbService = `service:
  name: db
  application: shop
  kubernetesConfig:
    type: KUBERNETES
    inlined: "kind: Job\n"
`

func TestValidateServiceDependencies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		changes map[string]string
		want    []string
	}{
		{
			name: "ordered services",
			changes: map[string]string{
				"services/db.pvn.yaml": dbService,
				"services/api.pvn.yaml": "service:\n  name: api\n  application: shop\n  kubernetesConfig: {type: KUBERNETES, inlined: \"kind: Deployment\\n\"}\n" +
					"  dependsOn:\n    - service: db\n  perReleaseChannel:\n    - releaseChannel: prod\n      dependsOn:\n        - {service: db, releaseChannel: staging}\n",
			},
		},
		{
			name: "unknown service, channel, self, twice",
			changes: map[string]string{
				"services/db.pvn.yaml": dbService,
				"services/api.pvn.yaml": "service:\n  name: api\n  application: shop\n  kubernetesConfig: {type: KUBERNETES, inlined: \"kind: Deployment\\n\"}\n" +
					"  dependsOn:\n    - service: dbb\n    - {service: db, releaseChannel: prd}\n    - service: api\n    - service: db\n    - releaseChannel: prod\n",
			},
			want: []string{
				`services/api.pvn.yaml:6:16: service.dependsOn[0].service: application "shop" has no service "dbb" (did you mean "db"?)`,
				`services/api.pvn.yaml:7:37: service.dependsOn[1].releaseChannel: application "shop" has no release channel "prd" (did you mean "prod"?)`,
				`services/api.pvn.yaml:8:16: service.dependsOn[2].service: service "api" cannot wait for itself; to order its own release channels, use a releaseChannelStable precondition`,
				`services/api.pvn.yaml:9:16: service.dependsOn[3].service: service "db" is listed twice (also service.dependsOn[1])`,
				`services/api.pvn.yaml:10:7: service.dependsOn[4].service: service is required`,
			},
		},
		{
			name: "cycle in one channel",
			changes: map[string]string{
				"services/db.pvn.yaml": dbService + "  perReleaseChannel:\n    - releaseChannel: prod\n      dependsOn:\n        - service: web\n",
				"services/api.pvn.yaml": "service:\n  name: api\n  application: shop\n  kubernetesConfig: {type: KUBERNETES, inlined: \"kind: Deployment\\n\"}\n" +
					"  dependsOn:\n    - service: db\n",
				"services/web.pvn.yaml": validTree["services/web.pvn.yaml"] + "  dependsOn:\n    - service: api\n",
			},
			want: []string{
				`services/api.pvn.yaml:6:7: service.dependsOn[0]: services wait for each other in a cycle: api in prod -> db in prod -> web in prod -> api in prod`,
				`services/db.pvn.yaml:10:11: service.perReleaseChannel[0].dependsOn[0]: services wait for each other in a cycle: api in prod -> db in prod -> web in prod -> api in prod`,
				`services/web.pvn.yaml:15:7: service.dependsOn[0]: services wait for each other in a cycle: api in prod -> db in prod -> web in prod -> api in prod`,
			},
		},
		{
			// api in prod waits for db in staging, db in staging for api
			// in staging: no channel waits for itself.
			name: "across channels is no cycle",
			changes: map[string]string{
				"services/db.pvn.yaml": dbService + "  perReleaseChannel:\n    - releaseChannel: staging\n      dependsOn:\n        - service: api\n",
				"services/api.pvn.yaml": "service:\n  name: api\n  application: shop\n  kubernetesConfig: {type: KUBERNETES, inlined: \"kind: Deployment\\n\"}\n" +
					"  perReleaseChannel:\n    - releaseChannel: prod\n      dependsOn:\n        - {service: db, releaseChannel: staging}\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := validateTree(t, tt.changes)
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", listLines(got), listLines(tt.want))
			}
		})
	}
}

func listLines(l []string) string {
	out := ""
	for _, s := range l {
		out += "  " + s + "\n"
	}
	return out
}

func TestChannelDependencies(t *testing.T) {
	t.Parallel()
	svc := &Service{
		DependsOn:         []ServiceDependency{{Service: "db"}, {Service: "cache"}},
		PerReleaseChannel: []PerReleaseChannel{{ReleaseChannel: "prod", DependsOn: []ServiceDependency{{Service: "db", ReleaseChannel: "staging"}, {Service: "auth"}}}},
	}
	if got, want := svc.ChannelDependencies("staging"), []ServiceDependency{{"db", "staging"}, {"cache", "staging"}}; !slices.Equal(got, want) {
		t.Errorf("staging: %v, want %v", got, want)
	}
	if got, want := svc.ChannelDependencies("prod"), []ServiceDependency{{"cache", "prod"}, {"db", "staging"}, {"auth", "prod"}}; !slices.Equal(got, want) {
		t.Errorf("prod: %v, want %v", got, want)
	}
}

func TestValidateSharedManualApproval(t *testing.T) {
	t.Parallel()
	app := func(pc string) map[string]string {
		return map[string]string{"shop.pvn.yaml": "application:\n  name: shop\n  releaseChannels:\n    - name: staging\n      runtimes:\n        - runtime: k8s\n    - name: prod\n      runtimes:\n        - runtime: k8s\n      preconditions:\n        - " + pc + "\n" +
			"      protections:\n        - ref: {name: window}\n          lifecycle:\n            - preApproval: {}\n"}
	}
	if got := validateTree(t, app("sharedManualApproval: {name: go-live, minApprovers: 2}")); len(got) != 0 {
		t.Errorf("a shared approval refused: %v", got)
	}
	got := validateTree(t, app("sharedManualApproval: {minApprovers: -1}"))
	want := []string{
		`shop.pvn.yaml:11:33: application.releaseChannels[1].preconditions[0].sharedManualApproval.name: name is required: the services that name it share one approval`,
		`shop.pvn.yaml:11:48: application.releaseChannels[1].preconditions[0].sharedManualApproval.minApprovers: must not be negative`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", listLines(got), listLines(want))
	}
}

func TestValidateMaestro(t *testing.T) {
	t.Parallel()
	svc := func(strategy string) map[string]string {
		return map[string]string{"services/web.pvn.yaml": validTree["services/web.pvn.yaml"] + "  maestro:\n    strategy: " + strategy + "\n"}
	}
	for _, ok := range []string{"RELEASE_TRAIN", "IMMEDIATE", "MAESTRO_DISABLED"} {
		if got := validateTree(t, svc(ok)); len(got) != 0 {
			t.Errorf("%s refused: %v", ok, got)
		}
	}
	want := []string{`services/web.pvn.yaml:15:15: service.maestro.strategy: unknown strategy "TRAIN": use RELEASE_TRAIN, IMMEDIATE or MAESTRO_DISABLED`}
	if got := validateTree(t, svc("TRAIN")); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", listLines(got), listLines(want))
	}
}
