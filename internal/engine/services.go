package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Ordering between services (service.dependsOn): a release channel of a
// service waits, before its target moves, until each service it depends on
// runs converged in the channel the dependency names. The planner decides
// it from the dependencies' instances, which the read step loads
// (readDependencies); a pass that changes a service's instances wakes the
// services that wait for it at once (dependants), so a dependant starts
// within a pass of its dependency converging, not a poll interval later.

// ServiceDependencies are the instances of the services a service waits
// for, by service and then by release channel (a service without a rollout
// has none).
type ServiceDependencies map[string]map[string]*store.Instance

// ActiveStates are the active desired states of the services of a
// service's release it waits for, by service (missing: none).
type ActiveStates map[string]ActiveState

// ActiveState is what decides which version of a dependency of the same
// release counts: the dependency's active desired state, when it was
// pushed, and whether a rollback made it.
type ActiveState struct {
	ID        string
	CreatedAt time.Time
	Rollback  bool
}

// dependencyServices are the services the channels of d wait for, sorted.
func dependencyServices(d *Desired) []string {
	var out []string
	for _, ch := range d.Channels {
		for _, dep := range ch.Services {
			out = append(out, dep.Service)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readDependencies reads the instances of the services cs's channels wait
// for.
func (l *Loop) readDependencies(ctx context.Context, app string, cs *compiledState) (ServiceDependencies, ActiveStates, error) {
	if len(cs.services) == 0 {
		return nil, nil, nil
	}
	out := make(ServiceDependencies, len(cs.services))
	var active ActiveStates
	for _, svc := range cs.services {
		if _, ok := cs.desired.Release.Member(svc); ok {
			// Whether the release's desired state of svc is still
			// its active one decides which version counts.
			rec, err := l.store.ActiveDesiredState(ctx, app, svc)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return nil, nil, fmt.Errorf("read the desired state of %s: %w", svc, err)
			default:
				if active == nil {
					active = ActiveStates{}
				}
				active[svc] = ActiveState{ID: rec.ID, CreatedAt: rec.CreatedAt, Rollback: rec.Rollback}
			}
		}
		list, err := l.store.ListInstances(ctx, app, svc)
		if err != nil {
			return nil, nil, fmt.Errorf("read the instances of %s: %w", svc, err)
		}
		byChannel := make(map[string]*store.Instance, len(list))
		for i := range list {
			byChannel[list[i].ReleaseChannel] = &list[i]
		}
		out[svc] = byChannel
	}
	return out, active, nil
}

// ApprovalReader reads the approvals of a desired state.
type ApprovalReader interface {
	ListApprovals(ctx context.Context, desiredStateID string) ([]store.Approval, error)
}

// SharedApprovals adds to own (the approvals of d's desired state) those
// of the sharedManualApproval topics given on the other desired states of
// d's release: one approval serves every service of the release naming it.
// Without a release, a shared approval is d's own.
func SharedApprovals(ctx context.Context, r ApprovalReader, d *Desired, own []store.Approval) ([]store.Approval, error) {
	if d.Release == nil {
		return own, nil
	}
	out := own
	for _, m := range d.Release.Services {
		if m.DesiredStateID == d.ID {
			continue
		}
		list, err := r.ListApprovals(ctx, m.DesiredStateID)
		if err != nil {
			return nil, err
		}
		for _, a := range list {
			if strings.HasPrefix(a.Topic, ds.SharedTopic("")) {
				out = append(slices.Clip(out), a)
			}
		}
	}
	return out, nil
}

// serviceMet is the entry of an instance's Satisfied that records
// dependency dep met for version: "service:SVC/RC@VERSION", and
// "...=WANT" when a release asked for the dependency's version WANT (so a
// re-push of the same version in another release meets it again).
func serviceMet(dep ds.ServiceDependency, version, want string) string {
	key := "service:" + dep.Service + "/" + dep.ReleaseChannel + "@" + version
	if want != "" {
		key += "=" + want
	}
	return key
}

// servicesUnmet checks the channel's dependencies on other services and
// returns what each one not met is doing, for the waiting message. A
// dependency met once for the channel's version stays met (recorded in
// Satisfied) unless the dependency fails or rolls back before the target
// moves.
func (p *planner) servicesUnmet(s *step) []string {
	ch := s.ch
	if ch.Held != nil && ch.Held.Rollback {
		return nil // a rollback does not wait for other services either
	}
	var unmet []string
	for _, dep := range ch.Services {
		want := ReleaseVersion(p.in.Desired.Release, dep.Service, p.in.ActiveStates)
		key := serviceMet(dep, ch.Version, want)
		di, ok := p.in.Services[dep.Service][dep.ReleaseChannel]
		if ok {
			switch di.Status {
			case ds.StatusFailed, ds.StatusRollingBack, ds.StatusRolledBack, ds.StatusFailedRollback:
				s.inst.Satisfied = slices.DeleteFunc(slices.Clone(s.inst.Satisfied), func(x string) bool { return x == key })
			default:
				// Other states keep a dependency met earlier.
			}
		}
		if slices.Contains(s.inst.Satisfied, key) {
			continue
		}
		if ok && di.Status == ds.StatusConverged && di.CurrentVersion != "" && (want == "" || di.CurrentVersion == want) {
			s.inst.Satisfied = append(s.inst.Satisfied, key)
			continue
		}
		unmet = append(unmet, describeDependency(p.in.Desired.Service, dep, di, ok, want))
	}
	return unmet
}

// ReleaseVersion is the version dependency svc must run converged for a
// service of release rel: the release's version of svc, while the
// release's desired state of svc is active, not pushed yet (its active
// one is older than the release: the release's pushes are under way), or
// replaced by a rollback (which holds the dependants, as rolling back one
// service of a release rolls back no other). It is "" (any version) when
// there is no release, the release has no svc, or a later push of svc
// replaced the release's (the release's version will not come).
func ReleaseVersion(rel *ds.Release, svc string, active ActiveStates) string {
	m, ok := rel.Member(svc)
	if !ok {
		return ""
	}
	a, pushed := active[svc]
	if !pushed || a.ID == m.DesiredStateID || a.Rollback || a.CreatedAt.Before(rel.CreatedAt) {
		return m.Version
	}
	return ""
}

// quotedMax bounds the part of a dependency's message a waiting channel
// quotes: a chain stays readable, and services waiting for each other in a
// cycle no validation saw (desired states pushed under configs since
// changed) reach a fixed point instead of growing each other's messages.
const quotedMax = 1000

// describeDependency says what dependency dep is doing: its status and,
// when it waits or needs a person, its own message, so that a chain of
// services waiting for each other reads as one line ("db in prod (db:
// WAITING_MANUAL_APPROVAL: waiting for approval ...)"). A dependency on its
// way is named by its status only: quoting its progress would rewrite the
// waiting instance at every step the dependency takes. self names the
// waiting service: a dependency that waits for it is a cycle, said so
// rather than quoted.
func describeDependency(self string, dep ds.ServiceDependency, di *store.Instance, ok bool, want string) string {
	where := dep.Service + " in " + dep.ReleaseChannel
	if want != "" {
		where = dep.Service + " " + want + " in " + dep.ReleaseChannel
	}
	switch {
	case !ok:
		return where + " (" + dep.Service + " has no rollout there yet: drover push " + dep.Service + ")"
	case quoted(di.Status):
		what := string(di.Status)
		switch msg := di.Message; {
		case di.Reason == ds.ReasonServiceDependencyUnmet && strings.Contains(msg, "waiting for "+self+" "):
			what += ": it waits for " + self + ": a cycle of dependencies (drover validate shows where)"
		case len(msg) > quotedMax:
			what += ": " + msg[:quotedMax] + "…"
		case msg != "":
			what += ": " + msg
		}
		return fmt.Sprintf("%s (%s: %s)", where, dep.Service, what)
	case di.Status == ds.StatusConverged:
		return fmt.Sprintf("%s (%s: CONVERGED at %s)", where, dep.Service, ds.VersionLabel(di.CurrentVersion, ""))
	default:
		return fmt.Sprintf("%s (%s: %s)", where, dep.Service, di.Status)
	}
}

// quoted reports whether a channel waiting for a dependency in status st
// quotes its message (describeDependency): only then does a change of the
// message alone wake the services waiting for it.
func quoted(st ds.Status) bool {
	return needsAttention(st) || st == ds.StatusWaitingPreconditions || st == ds.StatusPending
}

// serviceWaitMessage is the message of a channel waiting for services.
func serviceWaitMessage(unmet []string) string {
	return "waiting for " + strings.Join(unmet, "; ")
}

// dependants maps each service to the services waiting for it, from the
// desired states the loop has read: a pass that changes a service's
// instances enqueues those waiting for it.
type dependants struct {
	mu sync.Mutex
	// of holds, by service key, the keys of the services waiting for it;
	// on, by service key, the keys it waits for (to undo when its
	// desired state changes).
	of map[string]map[string]bool
	on map[string][]string
}

// note records that the service key waits for the services deps of its
// application.
func (d *dependants) note(key, app string, deps []string) {
	keys := make([]string, len(deps))
	for i, dep := range deps {
		keys[i] = serviceKey(app, dep)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if slices.Equal(d.on[key], keys) {
		return
	}
	for _, old := range d.on[key] {
		delete(d.of[old], key)
	}
	if d.of == nil {
		d.of, d.on = map[string]map[string]bool{}, map[string][]string{}
	}
	if len(keys) == 0 {
		delete(d.on, key)
		return
	}
	d.on[key] = keys
	for _, k := range keys {
		if d.of[k] == nil {
			d.of[k] = map[string]bool{}
		}
		d.of[k][key] = true
	}
}

// waiting returns the keys of the services waiting for the service key.
func (d *dependants) waiting(key string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.of[key]) == 0 {
		return nil
	}
	out := make([]string, 0, len(d.of[key]))
	for k := range d.of[key] {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// wakeDependants enqueues the services waiting for the service key when a
// pass changed the status, reason, message or current version of one of
// its instances, or recorded outcomes (which change them before the plan).
func (l *Loop) wakeDependants(key string, before map[string]*store.Instance, written []store.Instance, outcomes bool) {
	changed := outcomes
	for _, in := range written {
		old, ok := before[in.ReleaseChannel]
		if !ok || old.Status != in.Status || old.Reason != in.Reason || old.CurrentVersion != in.CurrentVersion ||
			old.Message != in.Message && quoted(in.Status) {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	for _, k := range l.dependants.waiting(key) {
		l.queue.Add(k)
	}
}
