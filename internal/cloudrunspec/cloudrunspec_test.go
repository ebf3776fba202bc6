package cloudrunspec

import (
	"strings"
	"testing"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/encoding/prototext"
)

const full = `apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: hello
  namespace: my-project
  labels: {team: web}
  annotations:
    run.googleapis.com/ingress: internal
    example.com/owner: web-team
spec:
  template:
    metadata:
      name: hello-v1
      labels: {tier: front}
      annotations:
        autoscaling.knative.dev/minScale: "1"
        autoscaling.knative.dev/maxScale: "10"
        run.googleapis.com/execution-environment: gen2
        run.googleapis.com/cpu-throttling: "false"
    spec:
      serviceAccountName: hello@my-project.iam.gserviceaccount.com
      containerConcurrency: 40
      timeoutSeconds: 60
      containers:
        - name: app
          image: gcr.io/my-project/hello:1
          command: [/hello]
          args: [--port, "8080"]
          workingDir: /srv
          env: [{name: A, value: "1"}]
          ports: [{name: h2c, containerPort: 8080}]
          resources: {limits: {cpu: "2", memory: 1Gi}}
  traffic:
    - {percent: 90, revisionName: hello-v0}
    - {percent: 10, latestRevision: true, tag: canary}
`

func TestTranslateEveryMappedField(t *testing.T) {
	t.Parallel()
	k, err := Decode([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := k.Translate("my-project", "us-central1")
	if err != nil {
		t.Fatal(err)
	}
	want := `name:"projects/my-project/locations/us-central1/services/hello" labels:{key:"team" value:"web"} annotations:{key:"example.com/owner" value:"web-team"} ingress:INGRESS_TRAFFIC_INTERNAL_ONLY template:{revision:"hello-v1" labels:{key:"tier" value:"front"} scaling:{min_instance_count:1 max_instance_count:10} timeout:{seconds:60} service_account:"hello@my-project.iam.gserviceaccount.com" containers:{name:"app" image:"gcr.io/my-project/hello:1" command:"/hello" args:"--port" args:"8080" env:{name:"A" value:"1"} resources:{limits:{key:"cpu" value:"2"} limits:{key:"memory" value:"1Gi"}} ports:{name:"h2c" container_port:8080} working_dir:"/srv"} execution_environment:EXECUTION_ENVIRONMENT_GEN2 max_instance_request_concurrency:40} traffic:{type:TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION revision:"hello-v0" percent:90} traffic:{type:TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST percent:10 tag:"canary"}`
	var w runpb.Service
	if err := prototext.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if got := prototext.Format(svc); got != prototext.Format(&w) {
		t.Errorf("translated:\n%s\nwant:\n%s", got, prototext.Format(&w))
	}
}

// Every field drover does not map is refused by name and line.
func TestRefusals(t *testing.T) {
	t.Parallel()
	base := "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: hello\nspec:\n  template:\n    spec:\n      containers:\n        - image: x\n"
	for _, c := range []struct{ name, doc, want string }{
		{"probe", base + "          livenessProbe: {}\n", "line 10: spec.template.spec.containers[].livenessProbe: drover does not map this field"},
		{"volumes", base + "      volumes: []\n", "line 10: spec.template.spec.volumes: drover does not map"},
		{"valueFrom", base + "          env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n", "spec.template.spec.containers[].env[].valueFrom: drover does not map"},
		{"status", base + "status: {}\n", "line 10: status: drover does not map"},
		{"reserved annotation", strings.Replace(base, "  name: hello\n", "  name: hello\n  annotations: {run.googleapis.com/launch-stage: BETA}\n", 1), "metadata.annotations.run.googleapis.com/launch-stage: drover does not map this annotation"},
		{"kind", strings.Replace(base, "kind: Service", "kind: Job", 1), "line 2: kind: want Service"},
		{"name", strings.Replace(base, "name: hello", "name: Hello_World", 1), "metadata.name: \"Hello_World\" is not a Cloud Run service name"},
		{"namespace", strings.Replace(base, "  name: hello\n", "  name: hello\n  namespace: other\n", 1), "metadata.namespace: \"other\" is not the runtime's project"},
		{"traffic", base + "  traffic: [{percent: 50, latestRevision: true}]\n", "spec.traffic: the percents add up to 50"},
		{"two documents", base + "---\n" + base, "more than one YAML document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k, err := Decode([]byte(c.doc))
			if err == nil {
				_, err = k.Translate("my-project", "us-central1")
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}
