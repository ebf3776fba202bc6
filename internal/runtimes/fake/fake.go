// Package fake implements the fake runtime (`runtime: {fake: {}}`): a
// simulated backend that needs no infrastructure. It keeps, per service
// instance, the version being rolled out, when and for how long, and the
// objects applied; Fetch derives the rollout's progress from the clock.
// SetDrift simulates an out-of-band change, for exercising self-healing.
//
// # Clock, timers and notifications
//
// The clock is Options.Now. Every rollout with a duration queues its end in
// a min-heap. With the wall clock (Options.Now nil or time.Now) one real
// timer is armed at the earliest end and fires Tick, which notifies watchers
// of the rollouts that finished. With an injected clock no real timer is
// armed (the clock need not move with real time): tests advance their clock
// and call Tick themselves. Watchers are also notified after every Apply that
// changed something and after SetDrift.
//
// # Persistence and durability
//
// With Options.DataDir set, the state lives in <DataDir>/fake-<name>.json,
// written whole to a temporary file, fsynced and renamed over the old one (and
// the directory fsynced), so a crash at any point leaves either the old or
// the new file, never a torn one. Saves are coalesced: Apply and SetDrift
// only mark the state dirty and a background saver writes it at most once per
// SaveInterval (100ms by default); Close (and Flush) write synchronously.
// The trade-off: an Apply that returned may be lost if the process is killed
// within the coalescing window. That is safe for drover: the engine trusts
// Fetch, sees the older version and applies again (Apply is idempotent),
// exactly as it would after a real backend dropped a request. In exchange a
// burst of N applies costs O(1) file writes rather than N writes of O(N).
package fake

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// DefaultRolloutDuration is the rollout duration when the config sets none:
// visible in the UI, short enough not to bore.
const DefaultRolloutDuration = 3 * time.Second

// DefaultSaveInterval is how often, at most, the state file is written.
const DefaultSaveInterval = 100 * time.Millisecond

// Settings tune a fake runtime.
type Settings struct {
	// RolloutDuration is how long a rollout takes; 0 means instant.
	RolloutDuration time.Duration
	// FailVersions makes rollouts of matching versions fail at their end.
	FailVersions *regexp.Regexp
	// SaveInterval is the least time between two writes of the state file
	// (0 means DefaultSaveInterval). Only used with Options.DataDir.
	SaveInterval time.Duration
}

var (
	_ runtimes.Runtime       = (*Runtime)(nil)
	_ runtimes.Watcher       = (*Runtime)(nil)
	_ runtimes.Closer        = (*Runtime)(nil)
	_ runtimes.GraceReporter = (*Runtime)(nil)
)

// ConvergenceGrace implements runtimes.GraceReporter: Fetch shows an applied
// version at once, so a runtime that still shows the old one two seconds
// after an apply lost it (a crash before the coalesced save) and needs it again.
func (r *Runtime) ConvergenceGrace() time.Duration { return 2 * time.Second }

// Runtime is a simulated backend. It is safe for concurrent use.
type Runtime struct {
	// CheckDelegate runs protection commands (SetCheckRunner): drover's
	// composition root gives a custom runtime running them on its host.
	runtimes.CheckDelegate

	name      string
	settings  Settings
	now       func() time.Time
	realClock bool
	path      string // state file; "" when not persisted

	mu      sync.Mutex
	insts   map[runtimes.InstanceKey]*instance
	gen     uint64    // last rollout generation handed out
	events  eventHeap // rollout ends still to notify
	timer   *time.Timer
	timerAt time.Time
	closed  bool
	dirty   bool

	notifier runtimes.Notifier

	saveMu    sync.Mutex
	saves     atomic.Int64 // state files written, for tests
	dirtyCh   chan struct{}
	done      chan struct{} // closed by Close
	saverDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// instance is the simulated state of one service instance. Its objects
// slice is never modified once set, so snapshots may share it.
type instance struct {
	version        string
	desiredStateID string
	start          time.Time
	duration       time.Duration
	fails          bool
	drifted        bool
	hash           sum
	replicas       int32 // total target replicas
	objects        []object
	gen            uint64
}

type object struct {
	typ, namespace, name string
	key                  string // typ[/namespace]/name, as in the desired state graph
	replicas             int32
	hash                 sum
}

// Factory builds a fake runtime; it is the runtimehost.Factory for kind "fake".
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	r, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// New builds the fake runtime cfg describes (cfg.Fake), loading its state
// from opts.DataDir if it was saved there before.
func New(cfg *config.Runtime, opts runtimes.Options) (*Runtime, error) {
	if cfg == nil {
		return nil, errors.New("fake runtime: no config")
	}
	s := Settings{RolloutDuration: DefaultRolloutDuration}
	if f := cfg.Fake; f != nil {
		// Zero means unset in the config, so an instant rollout is not
		// expressible there; NewWithSettings allows it.
		s.RolloutDuration = f.RolloutDuration.Or(DefaultRolloutDuration)
		if f.FailVersions != "" {
			re, err := regexp.Compile(f.FailVersions)
			if err != nil {
				return nil, fmt.Errorf("runtime %s: fake.failVersions: invalid regular expression: %w", cfg.Name, err)
			}
			s.FailVersions = re
		}
	}
	return Open(cfg.Name, s, opts)
}

// NewWithSettings builds a fake runtime for tests and benchmarks. It panics
// if opts.DataDir holds a state file that cannot be loaded; use Open to get
// that error instead.
func NewWithSettings(name string, s Settings, opts runtimes.Options) *Runtime {
	r, err := Open(name, s, opts)
	if err != nil {
		panic(err)
	}
	return r
}

// Open builds a fake runtime named name, loading its state from
// opts.DataDir if it was saved there before. A state file that cannot be
// read or decoded is an error: the simulated cluster is never silently lost.
func Open(name string, s Settings, opts runtimes.Options) (*Runtime, error) {
	if s.RolloutDuration < 0 {
		return nil, fmt.Errorf("fake runtime %s: negative rollout duration %v", name, s.RolloutDuration)
	}
	if s.SaveInterval <= 0 {
		s.SaveInterval = DefaultSaveInterval
	}
	r := &Runtime{
		name:      name,
		settings:  s,
		now:       opts.Now,
		realClock: isWallClock(opts.Now),
		insts:     map[runtimes.InstanceKey]*instance{},
		done:      make(chan struct{}),
	}
	if r.now == nil {
		r.now = time.Now
	}
	if opts.DataDir != "" {
		path, err := statePath(opts.DataDir, name)
		if err != nil {
			return nil, err
		}
		r.path = path
		if err := r.load(); err != nil {
			return nil, err
		}
		r.dirtyCh = make(chan struct{}, 1)
		r.saverDone = make(chan struct{})
		go r.saver()
	}
	return r, nil
}

// isWallClock reports whether now is the wall clock: nil or time.Now itself
// (any other function, even one wrapping time.Now, counts as injected).
func isWallClock(now func() time.Time) bool {
	return now == nil || reflect.ValueOf(now).Pointer() == reflect.ValueOf(time.Now).Pointer()
}

// Name is the runtime's name.
func (r *Runtime) Name() string { return r.name }

// Apply starts rolling out target, or does nothing if target is what was
// last applied (and has not drifted since). It never waits for the rollout.
// Watchers are notified when it changed something: an apply that changes
// nothing changes no state, and notifying it could feed a loop of
// fetch-and-reapply in the engine.
func (r *Runtime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.ApplyResult{}, err
	}
	if t.Version == "" {
		return runtimes.ApplyResult{}, runtimes.Permanent(fmt.Errorf("fake runtime %s: %s: target has no version", r.name, t.InstanceKey))
	}
	var stack [8]sum
	var sums []sum
	if n := len(t.Objects); n <= len(stack) {
		sums = stack[:n]
	} else {
		sums = make([]sum, n)
	}
	h := targetHash(&t, sums)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return runtimes.ApplyResult{}, fmt.Errorf("fake runtime %s is closed", r.name)
	}
	if res, ok := r.unchangedLocked(&t, h); ok {
		r.mu.Unlock()
		return res, nil
	}
	r.mu.Unlock()

	// Decode the objects outside the lock; only a changed target pays for it.
	objs, replicas, err := r.parseObjects(&t, sums)
	if err != nil {
		return runtimes.ApplyResult{}, runtimes.Permanent(fmt.Errorf("fake runtime %s: %s: %w", r.name, t.InstanceKey, err))
	}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return runtimes.ApplyResult{}, fmt.Errorf("fake runtime %s is closed", r.name)
	}
	// Someone may have applied the same target meanwhile.
	if res, ok := r.unchangedLocked(&t, h); ok {
		r.mu.Unlock()
		return res, nil
	}
	prev := r.insts[t.InstanceKey]
	res := runtimes.ApplyResult{Changes: diff(prev, objs)}
	in := prev
	if in == nil {
		in = &instance{}
		r.insts[t.InstanceKey] = in
	}
	r.gen++
	*in = instance{
		version:        t.Version,
		desiredStateID: t.DesiredStateID,
		start:          r.now(),
		duration:       r.settings.RolloutDuration,
		fails:          r.settings.FailVersions != nil && r.settings.FailVersions.MatchString(t.Version),
		hash:           h,
		replicas:       replicas,
		objects:        objs,
		gen:            r.gen,
	}
	if in.duration > 0 {
		r.scheduleLocked(event{at: in.start.Add(in.duration), key: t.InstanceKey, gen: in.gen})
	}
	r.markDirtyLocked()
	r.mu.Unlock()
	r.notify(t.InstanceKey)
	return res, nil
}

// unchangedLocked reports whether t (whose hash is h) is already applied
// and, if so, the all-unchanged result.
func (r *Runtime) unchangedLocked(t *runtimes.Target, h sum) (runtimes.ApplyResult, bool) {
	in := r.insts[t.InstanceKey]
	if in == nil || in.drifted || in.version != t.Version || in.hash != h {
		return runtimes.ApplyResult{}, false
	}
	changes := make([]runtimes.Change, len(in.objects))
	for i := range in.objects {
		changes[i] = runtimes.Change{Object: in.objects[i].key, Action: runtimes.ActionUnchanged}
	}
	return runtimes.ApplyResult{Changes: changes}, true
}

// diff reports created/configured/unchanged for objs against the previous
// apply, and deleted for the previous objects that are gone.
func diff(prev *instance, objs []object) []runtimes.Change {
	var old []object
	drifted := false
	if prev != nil {
		old, drifted = prev.objects, prev.drifted
	}
	changes := make([]runtimes.Change, 0, len(objs)+len(old))
	// Instances have a handful of objects: a linear scan beats a map until
	// they have many.
	var index map[string]int
	if len(objs)*len(old) > 256 {
		index = make(map[string]int, len(old))
		for i := range old {
			index[old[i].key] = i
		}
	}
	find := func(objs []object, key string) int {
		if index != nil {
			if i, ok := index[key]; ok {
				return i
			}
			return -1
		}
		for i := range objs {
			if objs[i].key == key {
				return i
			}
		}
		return -1
	}
	for i := range objs {
		a := runtimes.ActionCreated
		if j := find(old, objs[i].key); j >= 0 {
			a = runtimes.ActionConfigured
			if !drifted && old[j].hash == objs[i].hash {
				a = runtimes.ActionUnchanged
			}
		}
		changes = append(changes, runtimes.Change{Object: objs[i].key, Action: a})
	}
	if len(old) > 0 {
		if index != nil {
			index = make(map[string]int, len(objs))
			for i := range objs {
				index[objs[i].key] = i
			}
		}
		for i := range old {
			if find(objs, old[i].key) < 0 {
				changes = append(changes, runtimes.Change{Object: old[i].key, Action: runtimes.ActionDeleted})
			}
		}
	}
	return changes
}

// Fetch reports the state of the instance target names, as of now.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.State{}, err
	}
	r.mu.Lock()
	p := r.insts[t.InstanceKey]
	if p == nil {
		r.mu.Unlock()
		return runtimes.State{Message: "nothing deployed"}, nil
	}
	in := *p
	now := r.now()
	r.mu.Unlock()
	// The same version with other objects: what runs is not what the
	// target describes, as after an out-of-band edit.
	mismatch := !in.drifted && t.Version == in.version && targetHash(&t, nil) != in.hash
	return in.state(now, mismatch), nil
}

// state computes what runs at now.
func (in *instance) state(now time.Time, mismatch bool) runtimes.State {
	elapsed := max(now.Sub(in.start), 0)
	done := in.duration <= 0 || elapsed >= in.duration
	st := runtimes.State{Version: in.version, Objects: make([]runtimes.Object, len(in.objects))}
	var avail int32
	for i := range in.objects {
		o := &in.objects[i]
		a := o.replicas
		if !done {
			a = int32(int64(o.replicas) * int64(elapsed) / int64(in.duration)) //nolint:gosec // G115: 0 <= elapsed < duration here, so the result is below o.replicas and fits int32
		}
		if in.fails {
			// The last replica never becomes available.
			a = min(a, max(o.replicas-1, 0))
		}
		avail += a
		status := runtimes.ObjectPending
		if done {
			status = runtimes.ObjectSucceeded
			if in.fails && (o.replicas > 0 || in.replicas == 0) {
				status = runtimes.ObjectFailed
			}
		}
		st.Objects[i] = runtimes.Object{
			ObjectType: o.typ, Namespace: o.namespace, Name: o.name, Version: in.version,
			Replicas: o.replicas, AvailableReplicas: a, TargetReplicas: o.replicas, Status: status,
		}
	}
	replicas := strconv.FormatInt(int64(avail), 10) + "/" + strconv.FormatInt(int64(in.replicas), 10) + " replicas available"
	switch {
	case in.drifted:
		st.Version, st.Drifted = "", true
		for i := range st.Objects {
			st.Objects[i].Version = ""
			st.Objects[i].Status = runtimes.ObjectPending
		}
		st.Message = in.version + " was changed out of band (simulated drift)"
	case mismatch:
		st.Drifted = true
		st.Message = "objects of " + in.version + " differ from the target (drifted)"
	case !done:
		st.Message = "rolling out " + in.version + ": " + replicas
	case in.fails:
		st.Failed = true
		st.Message = "rollout of " + in.version + " failed: simulated failure (failVersions)"
	default:
		st.Converged = true
		st.Message = in.version + " running: " + replicas
	}
	return st
}

// SetDrift simulates an out-of-band change of the instance key: it no longer
// runs what was applied, until the next Apply. Watchers are notified.
func (r *Runtime) SetDrift(key runtimes.InstanceKey) error {
	r.mu.Lock()
	in := r.insts[key]
	if in == nil {
		r.mu.Unlock()
		return fmt.Errorf("fake runtime %s: nothing deployed for %s", r.name, key)
	}
	in.drifted = true
	r.markDirtyLocked()
	r.mu.Unlock()
	r.notify(key)
	return nil
}

// Close stops the timers and the saver and writes the state a last time.
// It is idempotent; Apply fails after it, Fetch still works.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		r.CloseChecks()
		r.mu.Lock()
		r.closed = true
		if r.timer != nil {
			r.timer.Stop()
		}
		r.mu.Unlock()
		close(r.done)
		if r.saverDone != nil {
			<-r.saverDone
			r.closeErr = r.Flush()
		}
	})
	return r.closeErr
}

// targetHash is the content hash of what t applies: its namespace, backend
// and objects (the version is compared separately). If sums is not nil, it
// receives the objects' own hashes (it has one entry per object).
func targetHash(t *runtimes.Target, sums []sum) sum {
	// Hash each object, then the list of object hashes: the per-object
	// hashes are what diff compares. A stack buffer covers a few objects.
	var stack [512]byte
	buf := stack[:0]
	buf = binary.AppendUvarint(buf, uint64(len(t.Namespace)))
	buf = append(buf, t.Namespace...)
	buf = binary.AppendUvarint(buf, uint64(len(t.Backend)))
	buf = append(buf, t.Backend...)
	for i, o := range t.Objects {
		h := sha256.Sum256(o)
		buf = append(buf, h[:]...)
		if sums != nil {
			sums[i] = h
		}
	}
	return sha256.Sum256(buf)
}

// rawObject is the part of a compiled object the fake runtime reads: a
// Kubernetes manifest, or a custom runtime object (kind + runtime).
type rawObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Runtime    string `json:"runtime"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Replicas *int64 `json:"replicas"`
	} `json:"spec"`
}

// parseObjects decodes t's objects; sums are their hashes.
func (r *Runtime) parseObjects(t *runtimes.Target, sums []sum) ([]object, int32, error) {
	objs := make([]object, len(t.Objects))
	var total int64
	for i, raw := range t.Objects {
		var ro rawObject
		if err := json.Unmarshal(raw, &ro); err != nil {
			return nil, 0, fmt.Errorf("object %d: %w", i, err)
		}
		o := &objs[i]
		o.hash = sums[i]
		custom := t.Backend == "customRuntime" || t.Backend == "" && ro.APIVersion == "" && ro.Runtime != ""
		if custom {
			// Named like the desired state graph names it: its kind
			// (custom, terraformRunner, fake) and the runtime's name.
			o.typ, o.name, o.replicas = ro.Kind, ro.Runtime, 1
			if o.typ == "" {
				o.typ = "CustomRuntime"
			}
			if o.name == "" {
				o.name = r.name
			}
		} else {
			if ro.Kind == "" || ro.Metadata.Name == "" {
				return nil, 0, fmt.Errorf("object %d: kind and metadata.name are required", i)
			}
			o.typ, o.name, o.namespace = ro.Kind, ro.Metadata.Name, ro.Metadata.Namespace
			if group, _, ok := cutLast(ro.APIVersion, '/'); ok {
				o.typ += "." + group
			}
			if o.namespace == "" {
				o.namespace = t.Namespace
			}
			switch {
			case ro.Spec.Replicas != nil:
				n := *ro.Spec.Replicas
				if n < 0 || n > math.MaxInt32 {
					return nil, 0, fmt.Errorf("object %d (%s %s): spec.replicas %d out of range", i, ro.Kind, ro.Metadata.Name, n)
				}
				o.replicas = int32(n)
			case ro.Kind == "Deployment" || ro.Kind == "StatefulSet":
				o.replicas = 1
			}
		}
		// The instance keeps its objects for as long as it lives: their
		// names are held once, as parts of the key, and the key once for
		// all the instances whose objects share it (services' objects are
		// often named alike in every channel, and from one service to the
		// next).
		o.key = unique.Make(objectKey(o.typ, o.namespace, o.name)).Value()
		o.typ, o.name = o.key[:len(o.typ)], o.key[len(o.key)-len(o.name):]
		if o.namespace != "" {
			o.namespace = o.key[len(o.typ)+1 : len(o.typ)+1+len(o.namespace)]
		}
		total += int64(o.replicas)
		if total > math.MaxInt32 {
			return nil, 0, fmt.Errorf("more than %d replicas in all", math.MaxInt32)
		}
	}
	return objs, int32(total), nil
}

func objectKey(typ, ns, name string) string {
	if ns != "" {
		return typ + "/" + ns + "/" + name
	}
	return typ + "/" + name
}

func cutLast(s string, sep byte) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
