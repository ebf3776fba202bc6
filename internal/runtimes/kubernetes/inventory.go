package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/drover-dev/drover/internal/kubeobj"
)

// inventory is what drover applied for one instance, the last time an apply
// completed: what to prune and what to compare the live objects with. It is
// kept in memory and in a ConfigMap in the instance's namespace (see
// inventoryName), so it survives a restart of drover.
type inventory struct {
	Version        string     `json:"version"`
	DesiredStateID string     `json:"desiredStateId,omitempty"`
	Objects        []invEntry `json:"objects"`
}

// invEntry is one applied object.
type invEntry struct {
	objRef
	// Hash is the object's applied-hash.
	Hash string `json:"hash"`
	// Fields is the hash of the fields drover's manager owned right after
	// the apply (its managedFields entry); another field manager taking
	// some of them changes it.
	Fields string `json:"fields,omitempty"`
	// GenerateName is set on an object created with metadata.generateName
	// (its Name is the apiserver's); For is the version that created it.
	GenerateName string `json:"generateName,omitempty"`
	For          string `json:"for,omitempty"`
	// Kept marks an install-only Helm hook applied by an earlier version:
	// kept, not applied again, not looked at by fetch.
	Kept bool `json:"kept,omitempty"`
}

func (inv *inventory) find(id string) int {
	if inv == nil {
		return -1
	}
	return slices.IndexFunc(inv.Objects, func(e invEntry) bool { return e.id() == id })
}

// findKey is find by key (invEntry.key: generated objects by generateName).
func (inv *inventory) findKey(key string) int {
	if inv == nil {
		return -1
	}
	return slices.IndexFunc(inv.Objects, func(e invEntry) bool { return e.key() == key })
}

func (inv *inventory) equal(o *inventory) bool {
	if inv == nil || o == nil {
		return inv == o
	}
	return inv.Version == o.Version && inv.DesiredStateID == o.DesiredStateID && slices.Equal(inv.Objects, o.Objects)
}

const inventoryKey = "inventory.json"

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// loadInventory returns in's inventory, reading it from the cluster the first
// time (an instance never applied has an empty one). After that the runtime's
// own applies keep it current: it is read once per process, never polled.
func (r *Runtime) loadInventory(ctx context.Context, in *instance) (*inventory, error) {
	r.mu.Lock()
	inv := in.inv
	r.mu.Unlock()
	if inv != nil {
		return inv, nil
	}
	cm, err := r.dyn.Resource(configMaps).Namespace(in.id.namespace).Get(ctx, inventoryName(in.id.InstanceKey), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		inv = &inventory{}
	case err != nil:
		return nil, fmt.Errorf("read the inventory of %s: %w", in.id.InstanceKey, err)
	default:
		data, _, _ := unstructured.NestedString(cm.Object, "data", inventoryKey)
		inv = &inventory{}
		if data != "" {
			if err := json.Unmarshal([]byte(data), inv); err != nil {
				return nil, fmt.Errorf("inventory %s/%s: %w", in.id.namespace, cm.GetName(), err)
			}
		}
	}
	r.mu.Lock()
	if in.inv == nil {
		in.inv = inv
	}
	inv = in.inv
	r.mu.Unlock()
	return inv, nil
}

// saveInventory writes inv to the cluster (server-side apply) and memory.
func (r *Runtime) saveInventory(ctx context.Context, in *instance, inv *inventory) error {
	data, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	k := in.id.InstanceKey
	cm := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      inventoryName(k),
			"namespace": in.id.namespace,
			// Not the service label: inventories are not objects of the
			// instance, and the watches select on that label.
			"labels": map[string]any{LabelInventory: "true", LabelApplication: k.Application, LabelReleaseChannel: k.ReleaseChannel},
			"annotations": map[string]any{
				kubeobj.AnnotationInstance: k.String(),
				AnnotationVersion:          inv.Version,
			},
		},
		"data": map[string]any{inventoryKey: string(data)},
	}
	ref := objRef{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: in.id.namespace, Name: inventoryName(k)}
	if _, _, err := r.serverSideApply(ctx, ref, cm); err != nil {
		return fmt.Errorf("write the inventory of %s: %w", k, err)
	}
	r.mu.Lock()
	in.inv = inv
	r.mu.Unlock()
	return nil
}
