package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drover-dev/drover/internal/runtimes"
)

// crdWait bounds how long Apply waits for the kinds a CRD of the same target
// defines to be served.
const crdWait = 30 * time.Second

// Apply server-side applies target's objects (field manager drover, conflicts
// forced), then deletes what the previous apply of the instance created and
// target no longer has. It reports every object as created, configured or
// unchanged, and the pruned ones as deleted (or skipped when another instance
// owns them now). It never waits for a rollout; it waits (briefly) until the
// watches show what it applied, so that a Fetch right after it sees it.
//
// Objects without a namespace go to target.Namespace, or to the managed
// namespace drover-<application>-<release channel>, which Apply creates.
// Invalid objects give a permanent error; anything else may be retried.
func (r *Runtime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	if err := r.closed(); err != nil {
		return runtimes.ApplyResult{}, err
	}
	if err := r.checkTarget(&t); err != nil {
		return runtimes.ApplyResult{}, runtimes.Permanent(err)
	}
	ns, managed := r.namespaceFor(&t)
	items, err := decodeTarget(&t, ns)
	if err != nil {
		return runtimes.ApplyResult{}, runtimes.Permanent(fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err))
	}
	in := r.instance(instanceID{InstanceKey: t.InstanceKey, namespace: ns})
	in.applyMu.Lock()
	defer in.applyMu.Unlock()
	res, err := r.apply(ctx, in, &t, items, managed)
	if err != nil {
		if managed {
			// The namespace may be gone: make sure of it next time.
			r.mu.Lock()
			delete(r.nsReady, ns)
			r.mu.Unlock()
		}
		if errors.Is(err, errPermanent) {
			return res, runtimes.Permanent(fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err))
		}
		return res, fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err)
	}
	return res, nil
}

// errPermanent marks errors that a retry cannot fix.
var errPermanent = errors.New("permanent")

type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() []error { return []error{e.err, errPermanent} }
func permanent(err error) error          { return permanentError{err} }
func (r *Runtime) checkTarget(t *runtimes.Target) error {
	if t.Version == "" {
		return fmt.Errorf("kubernetes runtime %s: %s: target has no version", r.name, t.InstanceKey)
	}
	if t.Backend != "" && t.Backend != "kubernetes" {
		return fmt.Errorf("kubernetes runtime %s: %s: cannot apply %s objects", r.name, t.InstanceKey, t.Backend)
	}
	if err := validateKey(t.InstanceKey); err != nil {
		return fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err)
	}
	return nil
}

func (r *Runtime) apply(ctx context.Context, in *instance, t *runtimes.Target, items []*item, managed bool) (runtimes.ApplyResult, error) {
	var res runtimes.ApplyResult
	ns := in.id.namespace
	if managed {
		if err := r.ensureNamespace(ctx, ns, t.InstanceKey); err != nil {
			return res, err
		}
	}
	old, err := r.loadInventory(ctx, in)
	if err != nil {
		return res, err
	}

	// Map and prepare what the cluster knows now. Kinds defined by CRDs of
	// this target are mapped once those are applied.
	hasCRD := false
	for _, it := range items {
		hasCRD = hasCRD || isCRD(it.gvk)
	}
	for _, it := range items {
		err := r.mapOrReset(it, ns)
		switch {
		case err == nil:
			if err := prepare(it, t); err != nil {
				return res, permanent(err)
			}
		case meta.IsNoMatchError(err) && hasCRD:
			// Mapped once the target's CRDs are applied.
		case meta.IsNoMatchError(err):
			return res, fmt.Errorf("%s %s: the cluster serves no such kind (%s): %w", it.gvk.Kind, it.obj.GetName(), it.gvk.GroupVersion(), err)
		default:
			return res, fmt.Errorf("%s %s: %w", it.gvk.Kind, it.obj.GetName(), err)
		}
	}

	// Record new objects in the inventory before creating them, so that
	// an apply interrupted half-way still knows what to prune.
	pending := &inventory{Version: old.Version, DesiredStateID: old.DesiredStateID, Objects: append([]invEntry(nil), old.Objects...)}
	for _, it := range items {
		if it.mapped && it.gen == "" && !installed(it, old) && pending.find(it.ref.id()) < 0 {
			pending.Objects = append(pending.Objects, invEntry{objRef: it.ref, Hash: it.hash})
		}
	}
	if len(pending.Objects) > len(old.Objects) {
		if err := r.saveInventory(ctx, in, pending); err != nil {
			return res, err
		}
	}

	inv := &inventory{Version: t.Version, DesiredStateID: t.DesiredStateID}
	var waits []cacheWant
	for _, it := range items {
		if !it.mapped {
			if err := r.waitMapping(ctx, it, ns); err != nil {
				return res, err
			}
			if err := prepare(it, t); err != nil {
				return res, permanent(err)
			}
		}
		if _, err := r.informers.get(ctx, it.ref.gvr(), r.settings.SyncTimeout); err != nil {
			return res, err
		}
		if installed(it, old) {
			// Installed: an install hook is not applied again (generated.go).
			kept := keepInstalled(it, old)
			inv.Objects = append(inv.Objects, kept...)
			for _, e := range kept {
				res.Changes = append(res.Changes, runtimes.Change{Object: e.id(), Action: runtimes.ActionSkipped})
			}
			continue
		}
		if it.gen != "" {
			e, action, err := r.applyGenerated(ctx, in, it, old, pending, t.Version)
			if err != nil {
				return res, err
			}
			res.Changes = append(res.Changes, runtimes.Change{Object: e.id(), Action: action})
			inv.Objects = append(inv.Objects, e)
			continue
		}
		action, live, err := r.applyItem(ctx, in, it)
		if err != nil {
			return res, err
		}
		res.Changes = append(res.Changes, runtimes.Change{Object: it.ref.id(), Action: action})
		fields, _ := droverFields(live)
		inv.Objects = append(inv.Objects, invEntry{objRef: it.ref, Hash: it.hash, Fields: fields})
		waits = append(waits, cacheWant{ref: it.ref, rv: live.GetResourceVersion()})
		if isCRD(it.gvk) {
			r.resetMapper(true)
		}
	}

	// Prune what the previous applies created and this one does not have,
	// the last applied first.
	for i := len(pending.Objects) - 1; i >= 0; i-- {
		e := pending.Objects[i]
		if inv.find(e.id()) >= 0 {
			continue
		}
		action, err := r.prune(ctx, in, e)
		if err != nil {
			return res, err
		}
		if action != "" {
			res.Changes = append(res.Changes, runtimes.Change{Object: e.id(), Action: action})
		}
	}
	if !inv.equal(pending) || !pending.equal(old) {
		if err := r.saveInventory(ctx, in, inv); err != nil {
			return res, err
		}
	}
	r.informers.waitFor(ctx, waits, r.settings.CacheWait)
	return res, nil
}

// mapOrReset maps it; when the kind is unknown it drops the discovery cache
// (at most once a second) and tries again.
func (r *Runtime) mapOrReset(it *item, ns string) error {
	err := mapItem(r.mapper, it, ns)
	if err != nil && meta.IsNoMatchError(err) && r.resetMapper(false) {
		err = mapItem(r.mapper, it, ns)
	}
	return err
}

// resetMapper drops the discovery cache, unless it was dropped less than a
// second ago and force is false. It reports whether it did.
func (r *Runtime) resetMapper(force bool) bool {
	r.resetMu.Lock()
	defer r.resetMu.Unlock()
	if !force && time.Since(r.lastReset) < time.Second {
		return false
	}
	r.lastReset = time.Now()
	r.mapper.Reset()
	return true
}

// waitMapping maps an object whose kind a CRD of the target defines, waiting
// for the apiserver to serve it.
func (r *Runtime) waitMapping(ctx context.Context, it *item, ns string) error {
	deadline := time.Now().Add(crdWait)
	for {
		err := r.mapOrReset(it, ns)
		if err == nil {
			return nil
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return fmt.Errorf("%s %s: the cluster serves no such kind (%s): %w", it.gvk.Kind, it.obj.GetName(), it.gvk.GroupVersion(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// applyItem applies one object and tells what the apply changed. Before the
// apply it reads the object from the watch cache; created comes from the
// apiserver's answer (201), and unchanged means the resourceVersion did not
// move (a no-op server-side apply does not write).
func (r *Runtime) applyItem(ctx context.Context, in *instance, it *item) (runtimes.Action, *unstructured.Unstructured, error) {
	id := it.ref.id()
	var beforeRV string
	if before := r.informers.cached(it.ref); before != nil {
		beforeRV = before.GetResourceVersion()
	}
	live, created, err := r.serverSideApply(ctx, it.ref, it.obj.Object)
	if err != nil && it.gvk.GroupKind() == jobKind && isImmutable(err) {
		// A Job's pod template cannot change: a new version is a new Job.
		live, err = r.recreate(ctx, it)
		created = false
		beforeRV = ""
	}
	if err != nil {
		err = fmt.Errorf("apply %s: %w", id, err)
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			err = permanent(err)
		}
		if apierrors.IsNotFound(err) && it.ref.Namespace != "" {
			err = fmt.Errorf("%w (drover creates only the namespaces it manages; the release channel's namespace must exist)", err)
		}
		return "", nil, err
	}
	rv := live.GetResourceVersion()
	r.mu.Lock()
	prevRV := in.rv[id]
	in.rv[id] = rv
	r.mu.Unlock()
	switch {
	case created:
		return runtimes.ActionCreated, live, nil
	case rv != "" && (rv == beforeRV || rv == prevRV):
		return runtimes.ActionUnchanged, live, nil
	default:
		return runtimes.ActionConfigured, live, nil
	}
}

func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "immutable")
}

// recreate deletes an object whose immutable fields changed and applies it again.
func (r *Runtime) recreate(ctx context.Context, it *item) (*unstructured.Unstructured, error) {
	r.log.InfoContext(ctx, "recreating object with changed immutable fields", "object", it.ref.id())
	bg := metav1.DeletePropagationBackground
	err := r.dyn.Resource(it.ref.gvr()).Namespace(it.ref.Namespace).Delete(ctx, it.ref.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("delete %s to recreate it: %w", it.ref.id(), err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		live, _, err := r.serverSideApply(ctx, it.ref, it.obj.Object)
		if err == nil {
			return live, nil
		}
		// The old object may still be on its way out.
		if !isImmutable(err) && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// serverSideApply applies obj (server-side, field manager drover, forcing
// conflicts) and returns the object the apiserver answered with and whether
// it created it.
func (r *Runtime) serverSideApply(ctx context.Context, ref objRef, obj map[string]any) (*unstructured.Unstructured, bool, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, false, permanent(err)
	}
	var code int
	res := r.rest.Patch(types.ApplyPatchType).
		AbsPath(apiPath(ref)...).
		NamespaceIfScoped(ref.Namespace, ref.Namespace != "").
		Resource(ref.Resource).
		Name(ref.Name).
		Param("fieldManager", FieldManager).
		Param("force", "true").
		Body(body).
		Do(ctx).
		StatusCode(&code)
	// Error, unlike Raw, decodes the apiserver's Status: reason and causes.
	if err := res.Error(); err != nil {
		return nil, false, err
	}
	raw, err := res.Raw()
	if err != nil {
		return nil, false, err
	}
	live := &unstructured.Unstructured{}
	if err := live.UnmarshalJSON(raw); err != nil {
		return nil, false, fmt.Errorf("decode the apiserver's answer: %w", err)
	}
	return live, code == http.StatusCreated, nil
}

// apiPath is the path prefix of ref's API group version.
func apiPath(ref objRef) []string {
	if ref.Group == "" {
		return []string{"/api", ref.Version}
	}
	return []string{"/apis", ref.Group, ref.Version}
}

// ensureNamespace creates (or updates) a managed namespace, once per process
// unless an apply in it fails.
func (r *Runtime) ensureNamespace(ctx context.Context, ns string, k runtimes.InstanceKey) error {
	r.mu.Lock()
	ready := r.nsReady[ns]
	r.mu.Unlock()
	if ready {
		return nil
	}
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata": map[string]any{
			"name":   ns,
			"labels": map[string]any{LabelManaged: "true", LabelApplication: k.Application, LabelReleaseChannel: k.ReleaseChannel},
		},
	}
	if _, _, err := r.serverSideApply(ctx, objRef{Version: "v1", Kind: "Namespace", Resource: "namespaces", Name: ns}, obj); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	r.mu.Lock()
	r.nsReady[ns] = true
	r.mu.Unlock()
	return nil
}

// prune deletes an object a previous apply created. It leaves alone the
// instance's namespace and objects another instance has taken over (skipped).
func (r *Runtime) prune(ctx context.Context, in *instance, e invEntry) (runtimes.Action, error) {
	if e.Group == "" && e.Kind == "Namespace" && e.Name == in.id.namespace {
		return runtimes.ActionSkipped, nil
	}
	if _, err := r.informers.get(ctx, e.gvr(), r.settings.SyncTimeout); err == nil {
		if live := r.informers.cached(e.objRef); live != nil && !ownedBy(live, in.id.InstanceKey) {
			return runtimes.ActionSkipped, nil
		}
	}
	bg := metav1.DeletePropagationBackground
	err := r.dyn.Resource(e.gvr()).Namespace(e.Namespace).Delete(ctx, e.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	switch {
	case err == nil, apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return runtimes.ActionDeleted, nil
	default:
		return "", fmt.Errorf("delete %s: %w", e.id(), err)
	}
}

// ownedBy reports whether obj carries the labels of instance k.
func ownedBy(obj *unstructured.Unstructured, k runtimes.InstanceKey) bool {
	l := obj.GetLabels()
	return l[LabelApplication] == k.Application && l[LabelService] == k.Service && l[LabelReleaseChannel] == k.ReleaseChannel
}

// Render returns target's objects exactly as Apply would send them, in apply
// order, so that a person can replay an apply with `kubectl apply
// --server-side --field-manager=drover --force-conflicts`. It asks the
// cluster which kinds are namespaced. The values of the instance's env
// Secret are shown as (redacted).
func (r *Runtime) Render(ctx context.Context, t runtimes.Target) ([]map[string]any, error) {
	if err := r.closed(); err != nil {
		return nil, err
	}
	if err := r.checkTarget(&t); err != nil {
		return nil, err
	}
	ns, _ := r.namespaceFor(&t)
	items, err := decodeTarget(&t, ns)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err)
	}
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.mapOrReset(it, ns); err != nil {
			return nil, fmt.Errorf("kubernetes runtime %s: %s: %s %s: %w", r.name, t.InstanceKey, it.gvk.Kind, it.obj.GetName(), err)
		}
		if err := prepare(it, &t); err != nil {
			return nil, fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err)
		}
		if it.secretData != nil {
			it.obj.Object["data"] = redactedData(it.secretData)
		}
		out = append(out, it.obj.Object)
	}
	return out, nil
}
