package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/drover-dev/drover/internal/kubeobj"
	"github.com/drover-dev/drover/internal/runtimes"
)

// objRef names one applied object; it is what the inventory records.
type objRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// typ is the object type as the desired state graph names it: Kind, or
// Kind.group outside the core group.
func (o objRef) typ() string {
	if o.Group == "" {
		return o.Kind
	}
	return o.Kind + "." + o.Group
}

// id is the object's key in changes and in the inventory: typ[/namespace]/name.
// It leaves out the API version, so one object served at two versions is one object.
func (o objRef) id() string {
	if o.Namespace != "" {
		return o.typ() + "/" + o.Namespace + "/" + o.Name
	}
	return o.typ() + "/" + o.Name
}

// short names the object for messages: Kind/name.
func (o objRef) short() string { return o.Kind + "/" + o.Name }

func (o objRef) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: o.Group, Version: o.Version, Resource: o.Resource}
}

// cacheKey is the object's key in its informer's store.
func (o objRef) cacheKey() string {
	if o.Namespace != "" {
		return o.Namespace + "/" + o.Name
	}
	return o.Name
}

// item is one target object on its way to the cluster.
type item struct {
	obj    *unstructured.Unstructured
	gvk    schema.GroupVersionKind
	ref    objRef
	mapped bool
	// hash is the content hash of the prepared object (what the
	// applied-hash annotation holds).
	hash string
	// secretData is the data of an env Secret (envsecret.go), which
	// prepare adds after hashing.
	secretData map[string]any
	// gen is the object's generateName when it has no name: it is
	// created once per version (generated.go).
	gen string
}

// decode parses the target's objects. Namespaces and CustomResourceDefinitions
// come first, so that what the other objects need exists when they are
// applied; the order of the others is kept.
func decode(t *runtimes.Target) ([]*item, error) {
	items := make([]*item, 0, len(t.Objects))
	seen := make(map[string]bool, len(t.Objects))
	for i, raw := range t.Objects {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		// The compiler checks the same rules (manifest.DecodeApplicable).
		if _, msg := kubeobj.Problem(m); msg != "" {
			return nil, fmt.Errorf("object %d: %s", i, msg)
		}
		obj := &unstructured.Unstructured{Object: m}
		gvk := obj.GroupVersionKind()
		k := kubeobj.Key(m)
		if seen[k] {
			return nil, fmt.Errorf("object %d: %s %s appears twice", i, gvk.Kind, obj.GetName())
		}
		seen[k] = true
		it := &item{obj: obj, gvk: gvk}
		if obj.GetName() == "" {
			it.gen = obj.GetGenerateName()
		}
		items = append(items, it)
	}
	slices.SortStableFunc(items, func(a, b *item) int { return applyRank(a.gvk) - applyRank(b.gvk) })
	return items, nil
}

// applyRank orders objects for apply: namespaces, then CRDs, then the rest.
func applyRank(gvk schema.GroupVersionKind) int {
	switch {
	case gvk.Group == "" && gvk.Kind == "Namespace":
		return 0
	case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return 1
	default:
		return 2
	}
}

func isCRD(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition"
}

// mapItem resolves it's resource and scope with the mapper and fixes its
// namespace: a namespaced object without one gets ns; a cluster-scoped object
// loses any it has.
func mapItem(mapper meta.RESTMapper, it *item, ns string) error {
	m, err := mapper.RESTMapping(it.gvk.GroupKind(), it.gvk.Version)
	if err != nil {
		return err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if it.obj.GetNamespace() == "" {
			it.obj.SetNamespace(ns)
		}
	} else {
		it.obj.SetNamespace("")
	}
	it.ref = objRef{
		Group: it.gvk.Group, Version: it.gvk.Version, Kind: it.gvk.Kind, Resource: m.Resource.Resource,
		Namespace: it.obj.GetNamespace(), Name: it.obj.GetName(),
	}
	it.mapped = true
	return nil
}

// podTemplatePaths are where the pod templates of the workload kinds live;
// they get the version annotation, so a new version rolls the pods.
var podTemplatePaths = map[schema.GroupKind][]string{
	{Group: "apps", Kind: "Deployment"}:  {"spec", "template", "metadata", "annotations"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec", "template", "metadata", "annotations"},
	{Group: "apps", Kind: "DaemonSet"}:   {"spec", "template", "metadata", "annotations"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec", "template", "metadata", "annotations"},
	{Group: "batch", Kind: "Job"}:        {"spec", "template", "metadata", "annotations"},
	{Group: "batch", Kind: "CronJob"}:    {"spec", "jobTemplate", "spec", "template", "metadata", "annotations"},
}

// prepare turns a mapped item into what drover applies: read-only fields
// dropped, drover's labels and annotations added, and its hash computed and
// recorded in the applied-hash annotation. The hash leaves out the
// desired-state annotation: a new desired state of the same version and
// objects is not a different object.
func prepare(it *item, t *runtimes.Target) error {
	obj := it.obj
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	delete(obj.Object, "status")
	if it.secretData != nil {
		delete(obj.Object, "data")
	}

	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelApplication] = t.Application
	labels[LabelService] = t.Service
	labels[LabelReleaseChannel] = t.ReleaseChannel
	obj.SetLabels(labels)

	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationVersion] = t.Version
	delete(ann, AnnotationDesiredState)
	delete(ann, AnnotationAppliedHash)
	obj.SetAnnotations(ann)

	if path, ok := podTemplatePaths[it.gvk.GroupKind()]; ok {
		tmpl, _, err := unstructured.NestedStringMap(obj.Object, path...)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", it.ref.short(), strings.Join(path, "."), err)
		}
		if tmpl == nil {
			tmpl = map[string]string{}
		}
		tmpl[AnnotationVersion] = t.Version
		if err := unstructured.SetNestedStringMap(obj.Object, tmpl, path...); err != nil {
			return fmt.Errorf("%s: %s: %w", it.ref.short(), strings.Join(path, "."), err)
		}
	}

	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", it.ref.short(), err)
	}
	it.hash = shortHash(data)
	ann[AnnotationAppliedHash] = it.hash
	if t.DesiredStateID != "" {
		ann[AnnotationDesiredState] = t.DesiredStateID
	}
	obj.SetAnnotations(ann)
	if it.secretData != nil {
		obj.Object["data"] = it.secretData
	}
	return nil
}

// shortHash is the first 128 bits of data's SHA-256, in hex.
func shortHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// validateKey checks that the key's names can be label values (drover's
// config validation already makes them DNS labels).
func validateKey(k runtimes.InstanceKey) error {
	var errs []error
	for _, f := range []struct{ what, v string }{{"application", k.Application}, {"service", k.Service}, {"release channel", k.ReleaseChannel}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s name is empty", f.what))
			continue
		}
		if msgs := validation.IsDNS1123Label(f.v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s name %q: %s", f.what, f.v, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// DNSLabel returns name if it is at most 63 characters, else its first
// characters, a dash and a short hash of the whole name.
func DNSLabel(name string) string {
	if len(name) <= validation.DNS1123LabelMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:4])
	head := strings.TrimRight(name[:validation.DNS1123LabelMaxLength-len(suffix)], "-")
	return head + suffix
}

// managedNamespace is the namespace drover creates for an application's
// release channel when the channel names none.
func managedNamespace(prefix string, k runtimes.InstanceKey) string {
	return DNSLabel(prefix + k.Application + "-" + k.ReleaseChannel)
}

// inventoryName names the ConfigMap holding an instance's inventory. The
// application and release channel are part of it, since an existing namespace
// may be shared by several instances.
func inventoryName(k runtimes.InstanceKey) string {
	return "drover-inventory." + k.Application + "." + k.Service + "." + k.ReleaseChannel
}
