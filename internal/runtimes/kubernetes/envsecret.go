package kubernetes

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
)

// The env Secret: the compiler injects a service's secret env (rawSecret,
// stored secret references) into its containers as secretKeyRefs to the
// Secret desiredstate.EnvSecretName names, never as values. Apply writes
// that Secret, in every namespace whose objects refer to it, from the
// target's resolved env (one key per variable, the keys the objects refer
// to), before the workloads; it is an object of the instance like any
// other: labelled, in the inventory, pruned with the instance or when no
// object refers to it any more. Its applied-hash leaves the values out
// (a digest of a short password could be guessed), so a changed value
// shows as a new version, whose pods the version annotation rolls anyway.

var secretKind = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// decodeTarget is decode plus the instance's env Secrets (ns is the
// instance's namespace).
func decodeTarget(t *runtimes.Target, ns string) ([]*item, error) {
	items, err := decode(t)
	if err != nil {
		return nil, err
	}
	return withEnvSecrets(t, items, ns)
}

// withEnvSecrets adds to items an env Secret for each namespace whose
// objects refer to one, right after the namespaces and CRDs.
func withEnvSecrets(t *runtimes.Target, items []*item, ns string) ([]*item, error) {
	name := desiredstate.EnvSecretName(t.Application, t.Service, t.ReleaseChannel)
	keys := map[string]map[string]bool{} // namespace -> keys referred to
	for _, it := range items {
		if it.gvk == secretKind && it.obj.GetName() == name {
			return nil, fmt.Errorf("object Secret %s: drover keeps the service's secret env in a Secret of that name; rename the object", name)
		}
		var refs map[string]bool
		secretKeyRefs(it.obj.Object, name, func(key string) {
			if refs == nil {
				refs = map[string]bool{}
			}
			refs[key] = true
		})
		if refs == nil {
			continue
		}
		objNS := it.obj.GetNamespace()
		if objNS == "" {
			objNS = ns
		}
		if keys[objNS] == nil {
			keys[objNS] = map[string]bool{}
		}
		maps.Copy(keys[objNS], refs)
	}
	if len(keys) == 0 {
		return items, nil
	}
	var secrets []*item
	for _, n := range slices.Sorted(maps.Keys(keys)) {
		data := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(keys[n])) {
			v, ok := t.Env[k]
			if !ok {
				return nil, fmt.Errorf("secret env %s has no value for Secret %s/%s (a secret reference drover did not resolve?)", k, n, name)
			}
			data[k] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"type":       "Opaque",
			"metadata":   map[string]any{"name": name, "namespace": n},
		}}
		secrets = append(secrets, &item{obj: obj, gvk: secretKind, secretData: data})
	}
	at := slices.IndexFunc(items, func(it *item) bool { return applyRank(it.gvk) > 1 })
	if at < 0 {
		at = len(items)
	}
	return slices.Insert(items, at, secrets...), nil
}

// secretKeyRefs calls found with the key of every secretKeyRef to the
// Secret name in v (an object or a part of one).
func secretKeyRefs(v any, name string, found func(key string)) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["secretKeyRef"].(map[string]any); ok && ref["name"] == name {
			if key, ok := ref["key"].(string); ok && key != "" {
				found(key)
			}
		}
		for _, e := range x {
			secretKeyRefs(e, name, found)
		}
	case []any:
		for _, e := range x {
			secretKeyRefs(e, name, found)
		}
	}
}

// redactedData is an env Secret's data as Render shows it: the keys, not
// the values.
func redactedData(data map[string]any) map[string]any {
	out := make(map[string]any, len(data))
	for k := range data {
		out[k] = "(redacted)"
	}
	return out
}
