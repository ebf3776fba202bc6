// Package kubeobj holds the rules a Kubernetes object must follow for drover
// to apply it. The Kubernetes runtime checks them before every apply, and the
// compiler checks the same rules when it decodes manifests (validate,
// compile, push), so that nothing every apply would refuse is accepted before
// a push. It depends on nothing but the standard library.
package kubeobj

import "strings"

// Problem says why obj (a decoded manifest) cannot be applied: the field at
// fault ("" for the object as a whole) and a message, or msg "" when it can.
func Problem(obj map[string]any) (field, msg string) {
	if s, _ := obj["apiVersion"].(string); s == "" {
		return "apiVersion", "apiVersion is required"
	}
	kind, _ := obj["kind"].(string)
	if kind == "" {
		return "kind", "kind is required"
	}
	if strings.HasSuffix(kind, "List") {
		return "kind", kind + ": lists are not supported; give the items one by one"
	}
	meta, _ := obj["metadata"].(map[string]any)
	if name, _ := meta["name"].(string); name != "" {
		return "", ""
	}
	if gen, _ := meta["generateName"].(string); gen != "" {
		// Created once per version, named by the apiserver (see the
		// Kubernetes runtime's generated.go).
		return "", ""
	}
	return "metadata.name", "metadata.name is required (or metadata.generateName, for an object created once per version)"
}

// Key identifies an object among those applied together: two objects with
// one key are the same object given twice. An object with generateName and
// no name is known by its generateName, followed by "*".
func Key(obj map[string]any) string {
	apiVersion, _ := obj["apiVersion"].(string)
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group = "" // the core group: "v1"
	}
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if name == "" {
		if gen, _ := meta["generateName"].(string); gen != "" {
			name = gen + "*"
		}
	}
	return kind + "." + group + "/" + ns + "/" + name
}
