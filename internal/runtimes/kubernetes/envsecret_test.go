package kubernetes

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
)

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// withSecretEnv is a Deployment whose container reads keys of the
// instance's env Secret (as the compiler injects them), and a plain one.
func withSecretEnv(d map[string]any, k runtimes.InstanceKey, keys ...string) map[string]any {
	name := desiredstate.EnvSecretName(k.Application, k.Service, k.ReleaseChannel)
	env := []any{map[string]any{"name": "LOG_LEVEL", "value": "info"}}
	for _, key := range keys {
		env = append(env, map[string]any{"name": key, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": name, "key": key}}})
	}
	c := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["env"] = env
	return d
}

// The env Secret is made for each namespace whose objects refer to it,
// with the keys they refer to, before the workloads; its hash leaves the
// values out; a key without a value is an error that names the key only.
func TestEnvSecretItems(t *testing.T) {
	t.Parallel()
	k := key("envsecret")
	other := withSecretEnv(deploymentObject("other", "v1", 1), k, "API_TOKEN")
	other["metadata"].(map[string]any)["namespace"] = "elsewhere"
	tg := target(t, k, "v1", configMapObject("cfg", "v1"), withSecretEnv(deploymentObject("web", "v1", 1), k, "DB_PASSWORD", "API_TOKEN"), other)
	tg.Env = map[string]string{"DB_PASSWORD": "hunter2", "API_TOKEN": "tok-1", "LOG_LEVEL": "info"}
	items, err := decodeTarget(&tg, "home")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.gvk.Kind+" "+it.obj.GetNamespace()+"/"+it.obj.GetName())
	}
	name := desiredstate.EnvSecretName("shop", "envsecret", "staging")
	want := "Secret elsewhere/" + name + ", Secret home/" + name + ", ConfigMap /cfg, Deployment /web, Deployment elsewhere/other"
	if strings.Join(got, ", ") != want {
		t.Fatalf("items:\n got %s\nwant %s", strings.Join(got, ", "), want)
	}
	home := items[1]
	if len(home.secretData) != 2 || home.secretData["DB_PASSWORD"] != base64.StdEncoding.EncodeToString([]byte("hunter2")) {
		t.Errorf("home data: %v", home.secretData)
	}
	if len(items[0].secretData) != 1 || items[0].secretData["API_TOKEN"] == nil {
		t.Errorf("elsewhere data: %v", items[0].secretData)
	}

	// The applied-hash is the same whatever the values.
	hash := func(password string) string {
		tg := tg
		tg.Env = map[string]string{"DB_PASSWORD": password, "API_TOKEN": "tok-1"}
		items, err := decodeTarget(&tg, "home")
		if err != nil {
			t.Fatal(err)
		}
		it := items[1]
		it.ref = objRef{Version: "v1", Kind: "Secret", Resource: "secrets", Namespace: "home", Name: name}
		if err := prepare(it, &tg); err != nil {
			t.Fatal(err)
		}
		if d, _, _ := unstructured.NestedStringMap(it.obj.Object, "data"); d["DB_PASSWORD"] != base64.StdEncoding.EncodeToString([]byte(password)) {
			t.Errorf("prepared data: %v", d)
		}
		return it.hash
	}
	if a, b := hash("hunter2"), hash("correct horse"); a != b || a == "" {
		t.Errorf("hash depends on the value: %q, %q", a, b)
	}

	tg.Env = map[string]string{"API_TOKEN": "tok-1"}
	_, err = decodeTarget(&tg, "home")
	if err == nil || !strings.Contains(err.Error(), "secret env DB_PASSWORD has no value") || strings.Contains(err.Error(), "tok-1") {
		t.Errorf("missing key: %v", err)
	}

	// Without references there is no Secret; an object of the name is refused.
	plain := target(t, k, "v1", deploymentObject("web", "v1", 1))
	if items, err := decodeTarget(&plain, "home"); err != nil || len(items) != 1 {
		t.Errorf("no references: %d items, %v", len(items), err)
	}
	clash := target(t, k, "v1", map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name}})
	if _, err := decodeTarget(&clash, "home"); err == nil || !strings.Contains(err.Error(), "rename the object") {
		t.Errorf("clash: %v", err)
	}
}

// On the real control plane: the Secret is applied with the values, the
// Deployment reads it, Render shows no value, Fetch sees no drift, and the
// Secret is pruned once no object refers to it.
func TestEnvSecretApply(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	k := key("envsecret")
	ns := managedNamespace(r.settings.NamespacePrefix, k)
	name := desiredstate.EnvSecretName(k.Application, k.Service, k.ReleaseChannel)
	v1 := target(t, k, "v1", withSecretEnv(deploymentObject("envsecret", "v1", 1), k, "DB_PASSWORD"))
	v1.Env = map[string]string{"DB_PASSWORD": "hunter2", "LOG_LEVEL": "info"}
	v1.Secrets = []string{"hunter2"}
	res := mustApply(t, r, v1)
	if a := actions(res)["Secret/"+ns+"/"+name]; a != runtimes.ActionCreated {
		t.Errorf("Secret: %s (changes %v)", a, res.Changes)
	}
	sec := get(t, secrets, ns, name)
	data, _, _ := unstructured.NestedStringMap(sec.Object, "data")
	if len(data) != 1 || data["DB_PASSWORD"] != base64.StdEncoding.EncodeToString([]byte("hunter2")) {
		t.Errorf("Secret data: %v", data)
	}
	if !ownedBy(sec, k) || sec.GetAnnotations()[AnnotationVersion] != "v1" {
		t.Errorf("Secret metadata: %v %v", sec.GetLabels(), sec.GetAnnotations())
	}
	dep := get(t, deployments, ns, "envsecret")
	env, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if s := strings.Join(envOf(env[0]), ","); s != "LOG_LEVEL=info,DB_PASSWORD<-"+name+"/DB_PASSWORD" {
		t.Errorf("Deployment env: %s", s)
	}
	st := waitConverged(t, r, v1)
	if st.Drifted {
		t.Errorf("drifted: %s", st.Message)
	}
	if again := mustApply(t, r, v1); actions(again)["Secret/"+ns+"/"+name] != runtimes.ActionUnchanged {
		t.Errorf("the same apply again: %v", again.Changes)
	}
	objs, err := r.Render(context.Background(), v1)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o["kind"] == "Secret" && o["data"].(map[string]any)["DB_PASSWORD"] != "(redacted)" {
			t.Errorf("Render shows the Secret's data: %v", o["data"])
		}
	}

	v2 := target(t, k, "v2", deploymentObject("envsecret", "v2", 1))
	res = mustApply(t, r, v2)
	if a := actions(res)["Secret/"+ns+"/"+name]; a != runtimes.ActionDeleted {
		t.Errorf("Secret after its references went: %s (changes %v)", a, res.Changes)
	}
	waitConverged(t, r, v2)
}

// envOf is a container's env as NAME=value or NAME<-secret/key.
func envOf(c any) []string {
	list, _ := c.(map[string]any)["env"].([]any)
	var out []string
	for _, e := range list {
		m := e.(map[string]any)
		if ref, ok, _ := unstructured.NestedStringMap(m, "valueFrom", "secretKeyRef"); ok {
			out = append(out, m["name"].(string)+"<-"+ref["name"]+"/"+ref["key"])
			continue
		}
		out = append(out, m["name"].(string)+"="+m["value"].(string))
	}
	return out
}
