package kubernetes

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Objects with metadata.generateName and no name (Argo CD and Helm hook
// Jobs, migration Jobs) are created, not applied: the apiserver names them.
// Like a hook, each is created once per version: an apply of the version
// that created it (a retry, a re-apply after drift, a restart) finds it in
// the inventory and leaves it as it is, even when it is gone (a Job removed
// by its ttlSecondsAfterFinished). The next version creates a new one and
// prunes the previous version's, as Helm's and Argo CD's default hook
// delete policy (before-hook-creation, BeforeHookCreation) replaces a hook.
// Fetch counts a generated object's health (a Job must complete) while it
// exists, and never reports it drifted: it is run once, not kept in shape.

// genKey is how a generated object of the target is known before it has a
// name: its type, namespace and generateName.
func genKey(ref objRef, generateName string) string {
	ref.Name = generateName + "*"
	return ref.id()
}

// key is the entry's key among the target's objects (see genKey).
func (e invEntry) key() string {
	if e.GenerateName != "" {
		return genKey(e.objRef, e.GenerateName)
	}
	return e.id()
}

// itemKey is the item's key among the target's objects.
func (it *item) key() string {
	if it.gen != "" {
		return genKey(it.ref, it.gen)
	}
	return it.ref.id()
}

// applyGenerated creates it (a generateName object) unless the inventory
// old has the one this version created. A created object is recorded in
// pending (saved at once: only the apiserver's answer tells its name).
func (r *Runtime) applyGenerated(ctx context.Context, in *instance, it *item, old, pending *inventory, version string) (invEntry, runtimes.Action, error) {
	key := it.key()
	for _, e := range old.Objects {
		if e.GenerateName != "" && e.key() == key && e.For == version {
			return e, runtimes.ActionUnchanged, nil
		}
	}
	live, err := r.dyn.Resource(it.ref.gvr()).Namespace(it.ref.Namespace).Create(ctx, it.obj, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		err = fmt.Errorf("create %s: %w", key, err)
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			err = permanent(err)
		}
		return invEntry{}, "", err
	}
	ref := it.ref
	ref.Name = live.GetName()
	e := invEntry{objRef: ref, Hash: it.hash, GenerateName: it.gen, For: version}
	pending.Objects = append(pending.Objects, e)
	if err := r.saveInventory(ctx, in, pending); err != nil {
		return invEntry{}, "", err
	}
	r.mu.Lock()
	in.rv[ref.id()] = live.GetResourceVersion()
	r.mu.Unlock()
	return e, runtimes.ActionCreated, nil
}

// Helm hook annotations (helm.sh/hook) of the events drover runs.
const (
	annotationHelmHook = "helm.sh/hook"
)

// installOnlyHook reports whether obj is a Helm hook of install events only
// (pre-install, post-install; no upgrade): Helm runs it when the release is
// installed, never on upgrades, so drover applies it on the instance's first
// install only (until an apply of the instance has completed).
func installOnlyHook(ann map[string]string) bool {
	v, ok := ann[annotationHelmHook]
	if !ok {
		return false
	}
	install := false
	for e := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(e) {
		case "pre-install", "post-install":
			install = true
		case "pre-upgrade", "post-upgrade":
			return false
		}
	}
	return install
}

// installed reports whether it is an install-only hook of an instance
// installed already (old: its inventory, which records a version once an
// apply has completed).
func installed(it *item, old *inventory) bool {
	return old.Version != "" && installOnlyHook(it.obj.GetAnnotations())
}

// keepInstalled carries the entries of old that hold install-only hook it
// into the new inventory, marked kept: applied on the first install, they
// are neither applied again nor pruned, and fetch no longer looks at them.
func keepInstalled(it *item, old *inventory) []invEntry {
	var out []invEntry
	for _, e := range old.Objects {
		if e.key() == it.key() {
			e.Kept = true
			out = append(out, e)
		}
	}
	return out
}
