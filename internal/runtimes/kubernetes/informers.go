package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/drover-dev/drover/internal/runtimes"
)

// informerSet holds one shared informer per resource type (GVR), started the
// first time an instance uses the type. Each watches the whole cluster for
// the objects carrying the service label, that is the objects drover
// applied, and nothing else: Fetch reads their caches and never asks the
// apiserver for single objects.
type informerSet struct {
	factory dynamicinformer.DynamicSharedInformerFactory
	stop    chan struct{}
	log     *slog.Logger
	onEvent func(obj any)

	mu    sync.Mutex
	byGVR map[schema.GroupVersionResource]cache.SharedIndexInformer
	// started is when each informer started: one that has not synced
	// within the sync timeout fails the next callers at once rather than
	// making each of them wait again.
	started map[schema.GroupVersionResource]time.Time
	closed  bool

	// changed is closed and replaced after every event; waitFor sleeps on it.
	chMu    sync.Mutex
	changed chan struct{}
}

func newInformerSet(dyn dynamic.Interface, log *slog.Logger, onEvent func(obj any)) *informerSet {
	selectDrover := func(o *metav1.ListOptions) { o.LabelSelector = LabelService }
	return &informerSet{
		// No resync: the watch keeps the cache current.
		factory: dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll, selectDrover),
		stop:    make(chan struct{}),
		log:     log,
		onEvent: onEvent,
		byGVR:   map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		started: map[schema.GroupVersionResource]time.Time{},
		changed: make(chan struct{}),
	}
}

// get returns the informer of gvr, starting it if needed, once its cache
// holds the objects that existed when it started.
func (s *informerSet) get(ctx context.Context, gvr schema.GroupVersionResource, timeout time.Duration) (cache.SharedIndexInformer, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("watch of %s: the runtime is closed", gvr)
	}
	inf := s.byGVR[gvr]
	if inf == nil {
		inf = s.factory.ForResource(gvr).Informer()
		log := s.log.With(slog.String("resource", gvr.String()))
		_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				log.Warn("watch failed; retrying", slog.Any("error", err))
			}
		})
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: s.event,
			UpdateFunc: func(old, obj any) {
				if o, ok := old.(*unstructured.Unstructured); ok {
					if n, ok := obj.(*unstructured.Unstructured); ok && o.GetResourceVersion() == n.GetResourceVersion() {
						return
					}
				}
				s.event(obj)
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				s.event(obj)
			},
		}); err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("watch of %s: %w", gvr, err)
		}
		s.byGVR[gvr] = inf
		s.started[gvr] = time.Now()
		s.factory.Start(s.stop)
	}
	started := s.started[gvr]
	s.mu.Unlock()
	if inf.HasSynced() {
		return inf, nil
	}
	if wait := time.Until(started.Add(timeout)); wait < timeout {
		timeout = max(wait, 0)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("watch of %s: not established within %v of its start (can drover list and watch %s in all namespaces?)", gvr, time.Since(started).Round(time.Second), gvr.Resource)
	}
	return inf, nil
}

func (s *informerSet) event(obj any) {
	s.chMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.chMu.Unlock()
	s.onEvent(obj)
}

// cached returns the object ref names from its informer's cache: nil when
// it is not there or its type is not watched yet. Callers must not modify it.
func (s *informerSet) cached(ref objRef) *unstructured.Unstructured {
	s.mu.Lock()
	inf := s.byGVR[ref.gvr()]
	s.mu.Unlock()
	if inf == nil {
		return nil
	}
	obj, ok, err := inf.GetIndexer().GetByKey(ref.cacheKey())
	if err != nil || !ok {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// cacheWant is an object version the cache should reach.
type cacheWant struct {
	ref objRef
	rv  string
}

// waitFor waits, at most timeout, until the cache holds every wanted object
// at its resourceVersion or a later one.
func (s *informerSet) waitFor(ctx context.Context, wants []cacheWant, timeout time.Duration) {
	if len(wants) == 0 {
		return
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.chMu.Lock()
		ch := s.changed
		s.chMu.Unlock()
		done := true
		for _, w := range wants {
			obj := s.cached(w.ref)
			if obj == nil || !rvAtLeast(obj.GetResourceVersion(), w.rv) {
				done = false
				break
			}
		}
		if done {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// rvAtLeast reports whether resourceVersion have is want or later. Resource
// versions are opaque, but the apiserver's are increasing integers; anything
// else compares by equality.
func rvAtLeast(have, want string) bool {
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return have == want
	}
	return h >= w
}

func (s *informerSet) shutdown() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.factory.Shutdown()
}

// onEvent turns a watch event into a notification of the object's instance.
func (r *Runtime) onEvent(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	l := u.GetLabels()
	k := runtimes.InstanceKey{Application: l[LabelApplication], Service: l[LabelService], ReleaseChannel: l[LabelReleaseChannel]}
	if k.Application == "" || k.Service == "" || k.ReleaseChannel == "" {
		return
	}
	r.events.add(k)
}

// debouncer gathers the instances that had events and hands them over
// together, delay after the first event: a rollout's burst of status updates
// makes one notification per instance, not dozens.
type debouncer struct {
	delay   time.Duration
	deliver func(keys ...runtimes.InstanceKey)

	mu      sync.Mutex
	pending map[runtimes.InstanceKey]struct{}
	timer   *time.Timer
	stopped bool
}

func newDebouncer(delay time.Duration, deliver func(keys ...runtimes.InstanceKey)) *debouncer {
	return &debouncer{delay: delay, deliver: deliver, pending: map[runtimes.InstanceKey]struct{}{}}
}

func (d *debouncer) add(k runtimes.InstanceKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.pending[k] = struct{}{}
	if d.timer == nil {
		d.timer = time.AfterFunc(d.delay, d.flush)
	}
}

func (d *debouncer) flush() {
	d.mu.Lock()
	keys := make([]runtimes.InstanceKey, 0, len(d.pending))
	for k := range d.pending {
		keys = append(keys, k)
	}
	clear(d.pending)
	d.timer = nil
	stopped := d.stopped
	d.mu.Unlock()
	if !stopped && len(keys) > 0 {
		d.deliver(keys...)
	}
}

func (d *debouncer) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
