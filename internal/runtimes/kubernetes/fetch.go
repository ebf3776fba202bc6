package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Status reasons in messages (reference §4.3), so people and the engine's
// readers see why an instance is not converged.
const (
	reasonUpdatingPods        = "UPDATING_PODS"
	reasonUnhealthyPods       = "UNHEALTHY_PODS"
	reasonVersionMismatch     = "VERSION_MISMATCH"
	reasonRuntimeObjectFailed = "RUNTIME_OBJECT_FAILED"
)

// Fetch reports the state of target's instance from the watch caches: the
// objects the last apply recorded in the inventory, their version
// annotation, their health (kstatus; a Job must complete) and drift. It makes
// no request to the apiserver once the instance's resource types are watched
// and its inventory was read (once per process).
//
// Version is the version all the objects carry ("" when one is missing or
// they disagree). Converged: every object is current, none drifted. Failed:
// an object failed (a Deployment past its progress deadline, a failed Job).
// Drifted: an object is missing, or another field manager changed a field
// drover set, or the objects of target's version differ from target's.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	if err := r.closed(); err != nil {
		return runtimes.State{}, err
	}
	if err := validateKey(t.InstanceKey); err != nil {
		return runtimes.State{}, fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err)
	}
	ns, _ := r.namespaceFor(&t)
	in := r.instance(instanceID{InstanceKey: t.InstanceKey, namespace: ns})
	inv, err := r.loadInventory(ctx, in)
	if err != nil {
		return runtimes.State{}, fmt.Errorf("kubernetes runtime %s: %w", r.name, err)
	}
	if len(inv.Objects) == 0 {
		return runtimes.State{Message: "nothing deployed"}, nil
	}
	objs := make([]observed, 0, len(inv.Objects))
	for _, e := range inv.Objects {
		if e.Kept {
			continue // an install hook of an earlier version
		}
		if _, err := r.informers.get(ctx, e.gvr(), r.settings.SyncTimeout); err != nil {
			return runtimes.State{}, fmt.Errorf("kubernetes runtime %s: %s: %w", r.name, t.InstanceKey, err)
		}
		live := r.informers.cached(e.objRef)
		if e.GenerateName != "" {
			if live == nil {
				continue // run and removed (a Job's TTL): not drift
			}
			o := observe(e, live, t.InstanceKey)
			o.drift, o.obj.Message = "", o.detail // run once, not kept in shape
			objs = append(objs, o)
			continue
		}
		objs = append(objs, observe(e, live, t.InstanceKey))
	}
	st := summarize(objs)
	if st.Version != "" && st.Version == t.Version && !st.Drifted {
		if exp := r.expected(in, &t); exp != nil && !sameObjects(exp, inv) {
			st.Converged, st.Failed, st.Drifted = false, false, true
			st.Message = "the objects of " + st.Version + " differ from the target (drifted)"
		}
	}
	return st, nil
}

// observed is one inventory object as the watch cache shows it.
type observed struct {
	obj     runtimes.Object
	present bool
	status  status.Status
	// drift says how the object drifted ("" when it did not).
	drift string
	// detail says why it is not current; reason is the §4.3 reason.
	detail, reason string
	workload       bool
}

func observe(e invEntry, live *unstructured.Unstructured, k runtimes.InstanceKey) observed {
	o := observed{obj: runtimes.Object{ObjectType: e.typ(), Namespace: e.Namespace, Name: e.Name, Status: runtimes.ObjectPending}}
	if live == nil {
		o.drift = e.short() + " is missing"
		o.status = status.NotFoundStatus
		o.obj.Message = o.drift
		return o
	}
	o.present = true
	o.obj.Version = live.GetAnnotations()[AnnotationVersion]
	o.drift = driftOf(e, live, k)

	gk := schema.GroupKind{Group: e.Group, Kind: e.Kind}
	res := health(gk, live)
	o.status = res.Status
	c := counts(gk, live)
	o.workload = c.known
	// Replicas holds the ready pods (runtimes.Object has no field of its own for them).
	o.obj.TargetReplicas, o.obj.Replicas, o.obj.AvailableReplicas = clamp(c.target), clamp(c.ready), clamp(c.available)
	switch res.Status {
	case status.CurrentStatus:
		o.obj.Status = runtimes.ObjectSucceeded
	case status.FailedStatus:
		o.obj.Status = runtimes.ObjectFailed
		o.reason = reasonRuntimeObjectFailed
		o.detail = e.short() + " failed: " + failure(res)
	default:
		o.reason = reasonUpdatingPods
		switch {
		case gk == jobKind:
			o.detail = fmt.Sprintf("%s: %d/%d completions succeeded, %d running", e.short(), c.available, c.target, c.ready)
		case c.known:
			if c.rolledOut && c.available < c.target {
				o.reason = reasonUnhealthyPods
			}
			o.detail = fmt.Sprintf("%s: %d/%d replicas available", e.short(), c.available, c.target)
		default:
			o.detail = e.short() + ": " + res.Message
		}
		o.detail += " (" + o.reason + ")"
	}
	o.obj.Message = o.detail
	if o.drift != "" {
		o.obj.Message = o.drift
	}
	return o
}

// summarize derives the instance's state from its objects.
func summarize(objs []observed) runtimes.State {
	st := runtimes.State{Objects: make([]runtimes.Object, len(objs))}
	version, first, mixed, missing := "", true, false, false
	var drifts, failed, pending []string
	var avail, target int64
	workloads := false
	for i, o := range objs {
		st.Objects[i] = o.obj
		switch {
		case !o.present:
			missing = true
		case first:
			version, first = o.obj.Version, false
		case o.obj.Version != version:
			mixed = true
		}
		if o.drift != "" {
			drifts = append(drifts, o.drift)
		}
		switch o.status {
		case status.CurrentStatus:
		case status.FailedStatus:
			failed = append(failed, o.detail)
		default:
			if o.present {
				pending = append(pending, o.detail)
			}
		}
		if o.workload {
			workloads = true
			avail += int64(o.obj.AvailableReplicas)
			target += int64(o.obj.TargetReplicas)
		}
	}
	if !missing && !mixed {
		st.Version = version
	}
	switch {
	case len(drifts) > 0:
		st.Drifted = true
		st.Message = strings.Join(drifts, "; ") + " (drifted)"
	case mixed:
		var parts []string
		for _, o := range objs {
			v := o.obj.Version
			if v == "" {
				v = "no version"
			}
			parts = append(parts, fmt.Sprintf("%s/%s runs %s", o.obj.ObjectType, o.obj.Name, v))
		}
		st.Message = strings.Join(parts, ", ") + " (" + reasonVersionMismatch + ")"
	case st.Version == "":
		st.Message = "the objects carry no version (" + reasonVersionMismatch + ")"
	case len(failed) > 0:
		st.Failed = true
		st.Message = "rollout of " + st.Version + " failed: " + strings.Join(failed, "; ") + " (" + reasonRuntimeObjectFailed + ")"
	case len(pending) > 0:
		st.Message = strings.Join(pending, "; ")
	default:
		st.Converged = true
		if workloads {
			st.Message = fmt.Sprintf("%s running: %d/%d replicas available", st.Version, avail, target)
		} else {
			st.Message = fmt.Sprintf("%s running: %d objects current", st.Version, len(objs))
		}
	}
	return st
}

// driftOf tells how live differs from what drover applied ("" when it does not).
func driftOf(e invEntry, live *unstructured.Unstructured, k runtimes.InstanceKey) string {
	switch {
	case live.GetDeletionTimestamp() != nil:
		return e.short() + " is being deleted"
	case !ownedBy(live, k):
		return e.short() + " was relabelled outside drover"
	case live.GetAnnotations()[AnnotationAppliedHash] != e.Hash:
		return e.short() + " was applied outside drover with other content"
	}
	if e.Fields == "" {
		return ""
	}
	fields, since := droverFields(live)
	if fields == e.Fields {
		return ""
	}
	msg := e.short() + " was changed outside drover"
	if others := otherManagers(live, since); len(others) > 0 {
		msg += " (by " + strings.Join(others, ", ") + ")"
	}
	return msg
}

// droverFields returns the hash of the fields drover's server-side applies
// own in obj, and when drover last applied it. Another manager changing one
// of those fields takes it from drover, which changes the hash.
func droverFields(obj *unstructured.Unstructured) (string, *metav1.Time) {
	if obj == nil {
		return "", nil
	}
	for _, m := range obj.GetManagedFields() {
		if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == "" {
			if m.FieldsV1 == nil {
				return "", m.Time
			}
			return shortHash(m.FieldsV1.Raw), m.Time
		}
	}
	return "none", nil
}

// otherManagers names the field managers that wrote obj since drover did,
// status writers aside.
func otherManagers(obj *unstructured.Unstructured, since *metav1.Time) []string {
	var names []string
	for _, m := range obj.GetManagedFields() {
		if m.Manager == FieldManager || m.Subresource == "status" {
			continue
		}
		if since != nil && m.Time != nil && m.Time.Before(since) {
			continue
		}
		name := m.Manager
		if m.Subresource != "" {
			name += " (" + m.Subresource + ")"
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// health is kstatus's verdict on obj, except that a Job is current only
// once it has completed.
func health(gk schema.GroupKind, obj *unstructured.Unstructured) *status.Result {
	if gk == jobKind && obj.GetDeletionTimestamp() == nil {
		for _, c := range conditions(obj) {
			switch {
			case c.Type == "Complete" && c.Status == "True":
				return &status.Result{Status: status.CurrentStatus, Message: "Job completed"}
			case c.Type == "Failed" && c.Status == "True":
				return &status.Result{Status: status.FailedStatus, Message: "Job failed", Conditions: []status.Condition{{Type: status.ConditionStalled, Status: "True", Reason: c.Reason, Message: c.Message}}}
			}
		}
		return &status.Result{Status: status.InProgressStatus, Message: "Job not complete"}
	}
	res, err := status.Compute(obj)
	if err != nil {
		return &status.Result{Status: status.UnknownStatus, Message: err.Error()}
	}
	if res.Status == status.FailedStatus && gk == deploymentKind && staleDeadline(obj) {
		return &status.Result{Status: status.InProgressStatus, Message: "waiting for the new rollout to progress"}
	}
	return res
}

var deploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}

// staleDeadline reports whether a Deployment's ProgressDeadlineExceeded
// condition predates drover's last change of it. The deployment controller
// keeps the condition of a failed rollout until the next one completes, so
// right after a rollback the previous version's failure would otherwise be
// taken for the rollback's. A rollout cannot time out in less than a second,
// so a condition updated no later than the apply (the times have second
// precision) is the previous rollout's.
func staleDeadline(obj *unstructured.Unstructured) bool {
	_, applied := droverFields(obj)
	if applied == nil {
		return false
	}
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Progressing" || m["reason"] != "ProgressDeadlineExceeded" {
			continue
		}
		s, _ := m["lastUpdateTime"].(string)
		at, err := time.Parse(time.RFC3339, s)
		return err == nil && !at.After(applied.Time)
	}
	return false
}

// failure describes a failed kstatus result: the stalled condition's reason
// and message when there is one.
func failure(res *status.Result) string {
	for _, c := range res.Conditions {
		if c.Type == status.ConditionStalled && (c.Reason != "" || c.Message != "") {
			if c.Message == "" {
				return c.Reason
			}
			return c.Reason + ": " + c.Message
		}
	}
	return res.Message
}

type condition struct{ Type, Status, Reason, Message string }

func conditions(obj *unstructured.Unstructured) []condition {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	out := make([]condition, 0, len(list))
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, condition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")})
	}
	return out
}

// replicaCounts are a workload's pods: wanted, ready and available (for a
// Job: completions wanted, pods running, completions succeeded).
type replicaCounts struct {
	target, ready, available int64
	// rolledOut is true when every pod runs the current template, so
	// missing availability is unhealthy pods, not an update in progress.
	rolledOut bool
	known     bool
}

func counts(gk schema.GroupKind, obj *unstructured.Unstructured) replicaCounts {
	n := func(def int64, path ...string) int64 {
		v, ok, err := unstructured.NestedInt64(obj.Object, path...)
		if err != nil || !ok {
			return def
		}
		return v
	}
	current := n(0, "status", "observedGeneration") >= obj.GetGeneration()
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		c := replicaCounts{target: n(1, "spec", "replicas"), ready: n(0, "status", "readyReplicas"), available: n(0, "status", "availableReplicas"), known: true}
		updated := c.target
		if gk.Kind == "Deployment" {
			updated = n(0, "status", "updatedReplicas")
		}
		c.rolledOut = current && updated >= c.target && n(0, "status", "replicas") <= c.target
		return c
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		c := replicaCounts{target: n(1, "spec", "replicas"), ready: n(0, "status", "readyReplicas"), available: n(0, "status", "availableReplicas"), known: true}
		cur, _, _ := unstructured.NestedString(obj.Object, "status", "currentRevision")
		upd, _, _ := unstructured.NestedString(obj.Object, "status", "updateRevision")
		c.rolledOut = current && cur == upd && n(0, "status", "updatedReplicas") >= c.target
		return c
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		c := replicaCounts{target: n(0, "status", "desiredNumberScheduled"), ready: n(0, "status", "numberReady"), available: n(0, "status", "numberAvailable"), known: true}
		c.rolledOut = current && n(0, "status", "updatedNumberScheduled") >= c.target
		return c
	case jobKind:
		completions := n(-1, "spec", "completions")
		if completions < 0 {
			completions = 1
		}
		return replicaCounts{target: completions, ready: n(0, "status", "active"), available: n(0, "status", "succeeded"), known: true}
	}
	return replicaCounts{}
}

func clamp(v int64) int32 {
	return int32(max(min(v, math.MaxInt32), math.MinInt32)) //nolint:gosec // G115: clamped to the int32 range
}

// expectation caches what a target prepares to: the hash of each object by
// id, or nil when it cannot be prepared (then nothing is compared).
type expectation struct {
	sum    [32]byte
	hashes map[string]string
}

// installHook marks the hash of an install-only Helm hook among the
// expected ones: an installed instance does not apply it (generated.go).
const installHook = "install-hook:"

// expected returns the objects t prepares to, computed once per target content.
func (r *Runtime) expected(in *instance, t *runtimes.Target) map[string]string {
	h := sha256.New()
	var n [8]byte
	for _, s := range []string{in.id.namespace, t.Version} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, o := range t.Objects {
		binary.LittleEndian.PutUint64(n[:], uint64(len(o)))
		h.Write(n[:])
		h.Write(o)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	r.mu.Lock()
	e := in.expect
	r.mu.Unlock()
	if e != nil && e.sum == sum {
		return e.hashes
	}
	var hashes map[string]string
	if items, err := decodeTarget(t, in.id.namespace); err == nil {
		hashes = make(map[string]string, len(items))
		for _, it := range items {
			// No discovery reset here: an unknown kind compares nothing
			// rather than polling discovery.
			if mapItem(r.mapper, it, in.id.namespace) != nil || prepare(it, t) != nil {
				hashes = nil
				break
			}
			hashes[it.key()] = it.hash
			if installOnlyHook(it.obj.GetAnnotations()) {
				hashes[it.key()] = installHook + it.hash
			}
		}
	}
	r.mu.Lock()
	in.expect = &expectation{sum: sum, hashes: hashes}
	r.mu.Unlock()
	return hashes
}

// sameObjects reports whether the inventory holds exactly the expected
// objects. A kept install hook stands for the target's, whatever its
// content: it is not applied again; and an installed instance (one whose
// inventory has a version) need not have an install hook it never applied.
func sameObjects(exp map[string]string, inv *inventory) bool {
	n := 0
	for _, e := range inv.Objects {
		h, ok := exp[e.key()]
		switch {
		case e.Kept:
			if ok {
				n++
			}
		case !ok || strings.TrimPrefix(h, installHook) != e.Hash:
			return false
		default:
			n++
		}
	}
	if inv.Version != "" {
		for k, h := range exp {
			if strings.HasPrefix(h, installHook) && inv.findKey(k) < 0 {
				n++
			}
		}
	}
	return n == len(exp)
}
