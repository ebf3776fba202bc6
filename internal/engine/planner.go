package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	engstate "github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
)

// PlanService decides, for every release channel of one service, what the
// instance's status is and whether to apply. It is a pure function of its
// input: no I/O, no clock (the time is in.Now), no goroutines. The executor
// writes the returned instances and events, then performs the applies; the
// next observation shows their effect.
//
// The rules, per channel:
//   - A new push resets the instance's bookkeeping; release channel
//     conditions already met for the replaced desired state carry over.
//   - A paused instance is never applied.
//   - While the target is not the desired version, the preconditions are
//     checked (release channels stable at the same version, then approvals);
//     only when all hold does the target move, and the version is applied.
//   - Once the target is the desired version, the observation decides:
//     converged, still rolling out (failed past the progress deadline),
//     failed (rolled back to the last converged version unless disabled), or
//     not showing the version (applied again: after the grace period, or at
//     once when a converged instance drifted).
//   - Applies are retried with exponential backoff; the instance fails after
//     Settings.MaxApplyAttempts.
func PlanService(in PlanInput) Plan {
	n := len(in.Desired.Channels)
	sc := scratches.Get().(*scratch)
	if cap(sc.insts) < n {
		sc.insts, sc.steps = make([]store.Instance, n), make([]step, n)
	}
	p := &planner{in: in, next: sc.next, started: sc.started, insts: sc.insts[:n], steps: sc.steps[:n]}
	for i, ch := range in.Desired.Channels {
		if ch.ConvergenceGrace.IsZero() && i < len(in.Desired.Graces) {
			ch.ConvergenceGrace.Duration = in.Desired.Graces[i]
		}
		p.channel(i, ch)
	}
	// Nothing of the plan points into the scratch space: instances are
	// copied into it, actions and events are values.
	clear(p.insts)
	clear(p.steps)
	clear(sc.next)
	clear(sc.started)
	scratches.Put(sc)
	return p.plan
}

// scratch is a plan's working space, kept for the next plan: the engine
// plans each service once per step of its rollout, and allocating this
// anew for each plan was a large share of what the engine allocated.
type scratch struct {
	insts   []store.Instance
	steps   []step
	next    map[string]*store.Instance
	started map[string]bool
}

var scratches = sync.Pool{New: func() any {
	return &scratch{next: map[string]*store.Instance{}, started: map[string]bool{}}
}}

type planner struct {
	in PlanInput
	// next holds the instances of the channels planned so far as this
	// plan leaves them (see instance).
	next map[string]*store.Instance
	plan Plan
	// started holds the task instances of the checks this plan runs.
	started map[string]bool
	// insts and steps hold each channel's instance and step while it is
	// planned (from the scratch space).
	insts []store.Instance
	steps []step
}

// instance returns release channel name's instance as the plan has it so
// far: as planned if its channel came before, else as stored.
func (p *planner) instance(name string) (store.Instance, bool) {
	if inst, ok := p.next[name]; ok {
		return *inst, true
	}
	if inst, ok := p.in.Instances[name]; ok {
		return *inst, true
	}
	return store.Instance{}, false
}

// requeue asks for another pass within d (the smallest request wins).
func (p *planner) requeue(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if p.plan.RequeueAfter == 0 || d < p.plan.RequeueAfter {
		p.plan.RequeueAfter = d
	}
}

func (p *planner) event(inst *store.Instance, typ ds.EventType, format string, args ...any) {
	p.plan.Events = append(p.plan.Events, store.Event{
		Time:           p.in.Now,
		Application:    inst.Application,
		Service:        inst.Service,
		ReleaseChannel: inst.ReleaseChannel,
		DesiredStateID: p.in.Desired.ID,
		Type:           typ,
		Actor:          "engine",
		Message:        fmt.Sprintf(format, args...),
	})
}

// eventData sets the Data of the event appended last.
func (p *planner) eventData(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("event data %T: %v", v, err)) // data types are plain structs
	}
	p.plan.Events[len(p.plan.Events)-1].Data = b
}

// transition records a channel that began to wait for people: an
// approval-requested event when it began waiting for an approval, a
// blocked event when it became BLOCKED or is blocked for another reason.
// One event per wait, not one per pass (notifications are sent of them).
func (p *planner) transition(old store.Instance, inst *store.Instance) {
	sameReason := inst.Reason == old.Reason || old.Reason == ds.ReasonEngineError // an engine error kept the status
	if inst.Status == old.Status && (sameReason || inst.Status != ds.StatusBlocked) &&
		inst.DesiredStateID == old.DesiredStateID {
		return
	}
	switch inst.Status {
	case ds.StatusWaitingManualApproval:
		p.event(inst, ds.EventApprovalRequested, "%s", inst.Message)
	case ds.StatusBlocked:
		p.event(inst, ds.EventBlocked, "%s", inst.Message)
		p.eventData(map[string]string{"reason": string(inst.Reason)})
	default:
		// Other statuses wait for nobody.
	}
}

// step is the state of one instance while it is being planned.
type step struct {
	inst *store.Instance
	ch   Channel
	// rollback is set while converging to a rollback target.
	rollback bool
}

// label names version in messages, with the channel's display name when
// it is the channel's desired version.
func (s *step) label(version string) string {
	if version != s.ch.Version {
		return version
	}
	return ds.VersionLabel(version, s.ch.DisplayName)
}

func (s *step) set(status ds.Status, reason ds.Reason, format string, args ...any) {
	s.inst.Status = status
	s.inst.Reason = reason
	s.inst.Message = fmt.Sprintf(format, args...)
}

func (p *planner) channel(i int, ch Channel) {
	d := p.in.Desired
	var old store.Instance
	stored, exists := p.in.Instances[ch.Name]
	if exists {
		old = *stored
	}
	inst := &p.insts[i]
	*inst = old
	if !exists {
		*inst = store.Instance{Application: d.Application, Service: d.Service, ReleaseChannel: ch.Name, Status: ds.StatusPending}
	}
	s := &p.steps[i]
	*s = step{inst: inst, ch: ch}
	defer func() {
		p.transition(old, inst)
		if !exists || instanceChanged(old, *inst) {
			inst.UpdatedAt = p.in.Now
			p.plan.Instances = append(p.plan.Instances, *inst)
		}
		p.next[ch.Name] = inst
	}()

	if inst.DesiredStateID != d.ID && carried(ch, inst) {
		// A rollback of another channel replaced the desired state and
		// left this one where it was: nothing else changes.
		inst.DesiredStateID = d.ID
		s.inst.ActionPending = false
	}
	if inst.DesiredStateID != d.ID {
		if inst.DesiredStateID != "" && !inst.Status.Terminal() && inst.Status != ds.StatusPaused {
			p.event(inst, ds.EventReplaced, "desired state %s replaced by %s (version %s)", inst.DesiredStateID, d.ID, d.Version)
		}
		inst.DesiredStateID = d.ID
		inst.ApplyAttempts = 0
		s.inst.RollbackFrom, s.inst.FailedVersion, s.inst.Healed = "", "", 0
		s.inst.ActionPending = false
		// Check results belong to the desired state they ran for.
		s.inst.Checks = slices.DeleteFunc(slices.Clone(s.inst.Checks), func(r store.CheckResult) bool { return r.DesiredStateID != ch.StateID })
		if s.inst.DesiredVersion != ch.Version {
			// Conditions carry over only to a re-push of the same version.
			s.inst.Satisfied = nil
		}
		s.inst.DesiredVersion = ch.Version
		switch inst.Status {
		case ds.StatusRollingBack, ds.StatusRolledBack, ds.StatusFailedRollback, ds.StatusFailed:
			inst.Status = ds.StatusPending
		default:
			// Other statuses carry over to the new desired state.
		}
	}
	if inst.Paused {
		s.set(ds.StatusPaused, ds.ReasonPaused, "paused; resume with drover resume")
		return
	}
	switch inst.Status {
	case ds.StatusRollingBack:
		s.rollback = true
		p.converge(s, inst.TargetStateID, inst.TargetVersion)
		return
	case ds.StatusRolledBack:
		// Pinned until the next push; keep the running version healthy.
		s.rollback = true
		p.converge(s, inst.TargetStateID, inst.TargetVersion)
		return
	case ds.StatusFailedRollback:
		return // needs a person: a new push or a manual rollback
	case ds.StatusFailed:
		if s.inst.FailedVersion == ch.Version {
			return // failed for this push; a new push or a rollback moves it
		}
	default:
		// Other statuses converge or gate below.
	}
	if inst.TargetStateID == ch.StateID && inst.TargetVersion == ch.Version {
		p.converge(s, ch.StateID, ch.Version)
		return
	}
	if p.in.Observed[ch.Name].Applying {
		// An apply of the previous target is still running: let it finish
		// before moving the target, so no apply is planned that cannot start.
		p.requeue(p.in.Settings.PollInterval)
		return
	}
	p.gate(s)
}

// carried reports whether ch is a channel a rollback of another channel
// kept where inst is: held by the desired state inst already targets.
func carried(ch Channel, inst *store.Instance) bool {
	return ch.Held != nil && !ch.Held.Rollback && inst.TargetStateID == ch.StateID && inst.TargetVersion == ch.Version
}

// needsAttention reports whether an instance in status st is stuck where it
// is until something happens (a person acts, a rollback ends), rather than on
// its way to converging: a channel waiting for it says so, with its message.
func needsAttention(st ds.Status) bool {
	switch st {
	case ds.StatusFailed, ds.StatusFailedRollback, ds.StatusRollingBack, ds.StatusRolledBack,
		ds.StatusPaused, ds.StatusBlocked, ds.StatusWaitingManualApproval:
		return true
	default:
		return false
	}
}

// isMet reports whether x, an entry of an instance's Satisfied, records
// dependency dep met for version: "dep@version" (compared in place: each
// pass checks every dependency of every channel).
func isMet(x, dep, version string) bool {
	return len(x) == len(dep)+1+len(version) && x[len(dep)] == '@' &&
		strings.HasPrefix(x, dep) && strings.HasSuffix(x, version)
}

// gate checks the preconditions of moving the target to the desired version.
func (p *planner) gate(s *step) {
	ch := s.ch
	var unmet []string
	deps := ch.DependsOn
	if ch.Held != nil && ch.Held.Rollback {
		deps = nil // a rollback does not wait for other channels (ds.Held)
	}
	for _, dep := range deps {
		// A condition met for this version stays met, even if the desired
		// state carrying it was replaced (a re-push of the same version).
		met := func(x string) bool { return isMet(x, dep, ch.Version) }
		di, ok := p.instance(dep)
		switch di.Status {
		case ds.StatusFailed, ds.StatusRollingBack, ds.StatusRolledBack, ds.StatusFailedRollback:
			// It was stable once, but no longer runs the version.
			s.inst.Satisfied = slices.DeleteFunc(slices.Clone(s.inst.Satisfied), met)
		default:
			// Other states keep a condition met earlier for this version.
		}
		if slices.ContainsFunc(s.inst.Satisfied, met) {
			continue
		}
		if ok && di.Status == ds.StatusConverged && di.CurrentVersion == ch.Version {
			s.inst.Satisfied = append(s.inst.Satisfied, dep+"@"+ch.Version)
			continue
		}
		switch {
		case !ok:
			unmet = append(unmet, dep+" (no rollout yet)")
		case needsAttention(di.Status):
			what := string(di.Status)
			if di.Message != "" {
				what += ": " + di.Message
			}
			unmet = append(unmet, fmt.Sprintf("%s (%s)", dep, what))
		default:
			// On its way: its own status says how far it got. Quoting that
			// here would rewrite this instance at every step the dependency
			// takes (and nest the whole chain in every message downstream).
			unmet = append(unmet, dep+" (not converged yet)")
		}
	}
	var pending []string
	for _, g := range ch.Approvals {
		approvers, rejection := p.approvals(ch.Name, g.Topic, g.Shared)
		if rejection != nil {
			s.inst.FailedVersion = ch.Version
			msg := fmt.Sprintf("rejected by %s", rejection.User)
			if rejection.Comment != "" {
				msg += ": " + rejection.Comment
			}
			s.set(ds.StatusFailed, ds.ReasonManualApprovalRejected, "%s", msg)
			p.event(s.inst, ds.EventFailed, "%s: %s", ch.Name, msg)
			return
		}
		if len(approvers) < g.MinApprovers {
			pending = append(pending, fmt.Sprintf("%s: %d/%d approvals", g.Topic, len(approvers), g.MinApprovers))
		}
	}
	if un := p.unenforced(ch); len(un) > 0 {
		s.set(ds.StatusWaitingPreconditions, ds.ReasonLifecycleCheckPending, "held: drover does not evaluate %s yet (not supported yet); remove the attachment to deploy", strings.Join(un, ", "))
		return
	}
	services := p.servicesUnmet(s)
	if len(unmet) > 0 || len(services) > 0 {
		var msg string
		reason := ds.ReasonReleaseChannelDependencyUnmet
		switch {
		case len(unmet) == 0:
			reason, msg = ds.ReasonServiceDependencyUnmet, serviceWaitMessage(services)
		case len(services) > 0:
			msg = fmt.Sprintf("waiting for %s to run %s converged: %s; and %s", joinNames(ch.DependsOn), ch.Version, strings.Join(unmet, "; "), serviceWaitMessage(services))
		default:
			msg = fmt.Sprintf("waiting for %s to run %s converged: %s", joinNames(ch.DependsOn), ch.Version, strings.Join(unmet, "; "))
		}
		if len(pending) > 0 {
			msg += "; then approval (" + strings.Join(pending, ", ") + ")"
		}
		s.set(ds.StatusWaitingPreconditions, reason, "%s", msg)
		p.requeue(p.in.Settings.PollInterval) // a dependency may converge in this same pass
		return
	}
	if p.blockedBy(s, ds.PhasePreApproval) {
		return
	}
	// Extensions of the APPROVAL phase run while the approvals are given.
	extHeld := p.blockedBy(s, phaseApproval)
	if len(pending) > 0 {
		s.set(ds.StatusWaitingManualApproval, ds.ReasonManualApprovalPending, "waiting for approval (%s): drover approve %s --app %s --release-channel %s",
			strings.Join(pending, ", "), s.inst.Service, s.inst.Application, ch.Name)
		return
	}
	if extHeld {
		return
	}
	if f := p.frozen(s, false); f != nil {
		s.set(ds.StatusBlocked, ds.ReasonFrozen, "%s not rolled out: %s", ch.Version, f.Describe())
		return
	}
	if p.blockedBy(s, ds.PhasePostApproval) || p.blockedBy(s, ds.PhaseDeployment) {
		return
	}
	s.inst.TargetStateID, s.inst.TargetVersion = ch.StateID, ch.Version
	s.inst.ApplyAttempts = 0
	s.inst.LastApplyAt = time.Time{}
	p.event(s.inst, ds.EventStarted, "%s: preconditions met, rolling out %s", ch.Name, ds.VersionLabel(ch.Version, ch.DisplayName))
	p.apply(s, ch.StateID, ch.Version)
	p.startExtensions(s, ds.PhaseDeployment)
}

// startExtensions runs the channel's extensions of phase that have not
// succeeded for the version (DEPLOYMENT ones start with the rollout; the
// channel converges only once they succeeded, see soaking).
func (p *planner) startExtensions(s *step, phase string) {
	for _, chk := range s.ch.Checks {
		if isExtension(chk) && phaseOf(chk) == phase && enforced(chk) && !p.bypassed(s.ch, chk) && !slices.Contains(s.inst.Satisfied, chk.Key()+"@"+s.ch.Version) {
			p.evaluate(s, chk, time.Time{})
		}
	}
}

// blockedBy evaluates the channel's checks of one lifecycle phase before
// the deployment and reports whether one fails or has no outcome yet: then
// the instance is BLOCKED, saying which check and why (or waits for a
// command check's run), and is planned again when the outcome can change (a
// window opens, the check runs again). preApproval and postApproval checks
// pass once per version (recorded in Satisfied); deployment checks must
// pass when the apply starts.
func (p *planner) blockedBy(s *step, phase string) bool {
	var failing, pending []string
	for _, chk := range s.ch.Checks {
		ext := isExtension(chk)
		if phaseOf(chk) != phase || ext && phase == ds.PhaseDeployment || !enforced(chk) || p.bypassed(s.ch, chk) {
			continue // deployment extensions run with the rollout
		}
		once := phase != ds.PhaseDeployment || ext
		met := chk.Key() + "@" + s.ch.Version
		if once && slices.Contains(s.inst.Satisfied, met) {
			continue
		}
		// A protection command's result counts in its phase while it is
		// no older than two poll intervals (it runs again after one): a
		// pass from long ago says nothing about now. An extension's
		// success counts for the desired state.
		since := p.in.Now.Add(-2 * checkInterval(chk, p.in.Settings))
		if ext {
			since = time.Time{}
		}
		v := p.evaluate(s, chk, since)
		switch {
		case v.pending:
			pending = append(pending, fmt.Sprintf("%s: %s", chk, v.Message))
			continue
		case v.Pass:
			if once {
				s.inst.Satisfied = append(s.inst.Satisfied, met)
			}
			continue
		}
		if !v.Until.IsZero() {
			p.requeue(v.Until.Sub(p.in.Now))
		}
		failing = append(failing, fmt.Sprintf("%s: %s", chk, v.Message))
	}
	switch {
	case len(failing) > 0:
		s.set(ds.StatusBlocked, ds.ReasonLifecycleCheckFailed, "blocked by %s", strings.Join(append(failing, pending...), "; "))
	case len(pending) > 0:
		s.set(ds.StatusWaitingPreconditions, ds.ReasonLifecycleCheckPending, "waiting for %s", strings.Join(pending, "; "))
	default:
		return false
	}
	return true
}

// verdict is a check's outcome as a plan sees it.
type verdict struct {
	ds.Result
	// pending: a command check has no outcome for this desired state yet
	// (its first run is on its way, or it could not run: Message says).
	pending bool
}

// evaluate returns chk's outcome at now: a builtin's, or the last run of a
// command check since the given time. It runs a command check again when
// it has no result since then, or its poll interval has passed (unless a
// run is open), and plans the service again when the next run is due.
func (p *planner) evaluate(s *step, chk ds.Check, since time.Time) verdict {
	if chk.Builtin != nil {
		return verdict{Result: chk.Builtin.Evaluate(p.in.Now)}
	}
	if isExtension(chk) {
		if dep := p.unmetDependency(s, chk); dep != "" {
			return verdict{pending: true, Result: ds.Result{Message: "waiting for extension " + dep + " to succeed"}}
		}
	}
	task := CheckTaskInstance(s.ch.Name, chk)
	running := p.in.Running[task] || p.started[task]
	run := func() {
		if !running {
			p.started[task] = true
			c := chk
			p.plan.Actions = append(p.plan.Actions, Action{Kind: ActionRunCheck, ReleaseChannel: s.ch.Name, StateID: s.ch.StateID, Version: s.ch.Version, Runtime: s.ch.Runtime, Check: &c})
			running = true
		}
	}
	res := p.lastResult(s, chk)
	if res == nil || res.At.Before(since) {
		run()
		return verdict{pending: true, Result: ds.Result{Message: "running"}}
	}
	switch due := res.At.Add(rerunAfter(chk, res, p.in.Settings)); {
	case isExtension(chk) && res.Passed && res.Error == "":
		// It succeeded once: that holds for the desired state.
	case p.in.Now.Before(due):
		p.requeue(due.Sub(p.in.Now))
	default:
		run()
	}
	if res.Error != "" {
		return verdict{pending: true, Result: ds.Result{Message: "could not run: " + res.Error}}
	}
	return verdict{Result: ds.Result{Pass: res.Passed, Message: res.Message}}
}

// lastResult is the last result of chk for the channel's desired state:
// its own, or for a shared extension run the newest any channel of the
// service recorded.
func (p *planner) lastResult(s *step, chk ds.Check) *store.CheckResult {
	res := lastResult(*s.inst, s.ch, chk)
	if chk.Shared == "" {
		return res
	}
	newer := func(inst store.Instance) {
		if r := lastResult(inst, s.ch, chk); r != nil && (res == nil || r.At.After(res.At)) {
			res = r
		}
	}
	for name, inst := range p.next {
		if name != s.ch.Name {
			newer(*inst)
		}
	}
	for name, inst := range p.in.Instances {
		if _, planned := p.next[name]; !planned && name != s.ch.Name {
			newer(*inst)
		}
	}
	return res
}

// unmetDependency names the first extension chk depends on that has not
// succeeded for the channel's desired state ("" when none).
func (p *planner) unmetDependency(s *step, chk ds.Check) string {
	for _, dep := range chk.DependsOn {
		for _, other := range s.ch.Checks {
			if !isExtension(other) || other.Name != dep {
				continue
			}
			if slices.Contains(s.inst.Satisfied, other.Key()+"@"+s.ch.Version) || p.bypassed(s.ch, other) {
				break
			}
			if r := p.lastResult(s, other); r == nil || !r.Passed || r.Error != "" {
				return dep
			}
			break
		}
	}
	return ""
}

// rerunAfter is how long after res chk runs again: a protection every poll
// interval; a failed extension after its retry policy's backoff (from
// baseInterval, default the check interval, doubling up to maxInterval,
// default 5m).
func rerunAfter(chk ds.Check, res *store.CheckResult, st Settings) time.Duration {
	if !isExtension(chk) {
		return checkInterval(chk, st)
	}
	base, limit := checkInterval(chk, st), 5*time.Minute
	if chk.Retry != nil {
		if chk.Retry.Base.Duration > 0 {
			base = chk.Retry.Base.Duration
		}
		if chk.Retry.Max.Duration > 0 {
			limit = chk.Retry.Max.Duration
		}
	}
	return backoff(base, max(limit, base), res.Runs-1)
}

// lastResult is the last result of command check chk of ch for its
// desired state recorded on inst, or nil.
func lastResult(inst store.Instance, ch Channel, chk ds.Check) *store.CheckResult {
	key := chk.RunKey()
	for i := range inst.Checks {
		if r := &inst.Checks[i]; r.Key == key && r.DesiredStateID == ch.StateID {
			return r
		}
	}
	return nil
}

// checkInterval is how often command check chk runs.
func checkInterval(chk ds.Check, st Settings) time.Duration {
	switch {
	case chk.PollInterval.Duration > 0:
		return chk.PollInterval.Duration
	case st.CheckInterval > 0:
		return st.CheckInterval
	}
	return DefaultSettings().CheckInterval
}

// frozen returns the freeze that holds the channel's new rollouts (or,
// with heal, its drift healing: freezes with NoHeal), or nil; the service
// is planned again when the first such freeze ends by itself.
func (p *planner) frozen(s *step, heal bool) *ds.Freeze {
	var hold *ds.Freeze
	for i := range p.in.Freezes {
		f := &p.in.Freezes[i]
		if !f.Active(p.in.Now) || heal && !f.NoHeal || !f.Covers(s.inst.Application, &s.ch.Channel) {
			continue
		}
		if !f.Until.IsZero() {
			p.requeue(f.Until.Sub(p.in.Now))
		}
		if hold == nil {
			hold = f
		}
	}
	return hold
}

// bypassed reports whether someone bypassed chk's attachment on ch for
// this desired state (drover bypass).
func (p *planner) bypassed(ch Channel, chk ds.Check) bool {
	topic := BypassTopic(checkAttachment(chk))
	for _, a := range p.in.Approvals {
		if a.DesiredStateID == p.in.Desired.ID && a.ReleaseChannel == ch.Name && a.Topic == topic && !a.Reject {
			return true
		}
	}
	return false
}

// unenforced lists the checks of ch the engine does not evaluate and
// nobody bypassed.
func (p *planner) unenforced(ch Channel) []string {
	var out []string
	for _, chk := range ch.Checks {
		if !enforced(chk) && !p.bypassed(ch, chk) {
			out = append(out, chk.String())
		}
	}
	return out
}

// soaking runs the channel's postDeployment checks once the runtime shows
// the version converged: each must pass from delayCheckDuration after that
// until checkDuration later (ConvergedAt records when the runtime first
// showed it, while the instance stays CONVERGING); one that fails then
// fails the channel (and rolls it back unless disabled). It reports
// whether the instance is still soaking (or failed), and plans the service
// again when a check's outcome can change or the soak ends.
func (p *planner) soaking(s *step, version string) bool {
	inst := s.inst
	var checks, exts []ds.Check
	for _, chk := range s.ch.Checks {
		switch {
		case !enforced(chk) || p.bypassed(s.ch, chk):
		case isExtension(chk):
			if ph := phaseOf(chk); (ph == ds.PhaseDeployment || ph == ds.PhasePostDeployment) && !slices.Contains(inst.Satisfied, chk.Key()+"@"+s.ch.Version) {
				exts = append(exts, chk)
			}
		case chk.Lifecycle == ds.PhasePostDeployment:
			checks = append(checks, chk)
		}
	}
	if len(checks) == 0 && len(exts) == 0 {
		return false
	}
	if inst.Reason != ds.ReasonLifecycleCheckPending || inst.Status != ds.StatusConverging || inst.ConvergedAt.IsZero() {
		inst.ConvergedAt = p.in.Now // the runtime shows the version converged
	}
	var waiting []string
	// Extensions of the deployment phases must have succeeded once (they
	// are retried until they do; they never fail the channel).
	for _, chk := range exts {
		switch v := p.evaluate(s, chk, time.Time{}); {
		case v.pending:
			waiting = append(waiting, fmt.Sprintf("%s: %s", chk, v.Message))
		case v.Pass:
			inst.Satisfied = append(inst.Satisfied, chk.Key()+"@"+s.ch.Version)
		default:
			waiting = append(waiting, fmt.Sprintf("%s failed, retrying: %s", chk, v.Message))
		}
	}
	for _, chk := range checks {
		start := inst.ConvergedAt.Add(chk.DelayCheck.Duration)
		end := start.Add(chk.CheckFor.Duration)
		if p.in.Now.Before(start) {
			waiting = append(waiting, fmt.Sprintf("%s starts at %s", chk, start.UTC().Format(time.TimeOnly)))
			p.requeue(start.Sub(p.in.Now))
			continue
		}
		// A builtin held for its whole duration once it ends; a command
		// check, once it ends with a passing run since it started.
		if !p.in.Now.Before(end) {
			if chk.Builtin != nil {
				continue
			}
			if r := lastResult(*inst, s.ch, chk); r != nil && r.Passed && r.Error == "" && !r.At.Before(start) {
				continue
			}
		}
		v := p.evaluate(s, chk, start)
		switch {
		case v.pending:
			waiting = append(waiting, fmt.Sprintf("%s: %s", chk, v.Message))
			continue
		case !v.Pass:
			p.fail(s, version, ds.ReasonLifecycleCheckFailed, fmt.Sprintf("%s failed %s after the deployment: %s", chk, p.in.Now.Sub(inst.ConvergedAt).Round(time.Second), v.Message))
			return true
		case !p.in.Now.Before(end):
			continue // it held for its whole duration
		}
		waiting = append(waiting, fmt.Sprintf("%s must pass until %s", chk, end.UTC().Format(time.TimeOnly)))
		p.requeue(end.Sub(p.in.Now))
		if !v.Until.IsZero() && v.Until.Before(end) {
			p.requeue(v.Until.Sub(p.in.Now))
		}
	}
	if len(waiting) == 0 {
		return false
	}
	s.set(ds.StatusConverging, ds.ReasonLifecycleCheckPending, "%s runs; postDeployment: %s", version, strings.Join(waiting, "; "))
	return true
}

// deploymentFailed evaluates the channel's deployment checks with
// failureBehavior FAIL while the version rolls out: one that fails fails
// the instance (and rolls it back unless disabled). It reports whether it
// did; passing checks plan the service again when they may change.
func (p *planner) deploymentFailed(s *step, version string) bool {
	for _, chk := range s.ch.Checks {
		if chk.Lifecycle != ds.PhaseDeployment || chk.FailureBehavior != ds.FailureFail || !enforced(chk) || p.bypassed(s.ch, chk) {
			continue
		}
		v := p.evaluate(s, chk, time.Time{})
		if !v.pending && !v.Pass {
			p.fail(s, version, ds.ReasonLifecycleCheckFailed, fmt.Sprintf("%s failed during the deployment: %s", chk, v.Message))
			return true
		}
		if !v.Until.IsZero() {
			p.requeue(v.Until.Sub(p.in.Now))
		}
	}
	return false
}

// approvals returns the distinct users who approved topic, or a rejection.
func (p *planner) approvals(rc, topic string, shared bool) ([]string, *store.Approval) {
	var users []string
	for i := range p.in.Approvals {
		a := &p.in.Approvals[i]
		if a.Topic != topic {
			continue
		}
		// A shared approval counts for every service of the release
		// naming it (the read step gives only those of the release's
		// desired states), in the channel it was given in: an approver
		// of one channel opens no other.
		if a.ReleaseChannel != rc || !shared && a.DesiredStateID != p.in.Desired.ID {
			continue
		}
		if a.Reject {
			return nil, a
		}
		if !slices.Contains(users, a.User) {
			users = append(users, a.User)
		}
	}
	return users, nil
}

// converge drives the instance to the target (stateID, version) from the observation.
func (p *planner) converge(s *step, stateID, version string) {
	inst := s.inst
	st := p.in.Settings
	obs, ok := p.in.Observed[s.ch.Name]
	working := ds.StatusConverging
	done := ds.StatusConverged
	if s.rollback {
		working, done = ds.StatusRollingBack, ds.StatusRolledBack
	}
	if !s.rollback && inst.Status != done && version == s.ch.Version {
		// DEPLOYMENT extensions run (and are retried) while the version
		// rolls out; the channel converges once they succeeded (soaking).
		p.startExtensions(s, ds.PhaseDeployment)
	}
	switch {
	case !ok:
		if inst.Status != done {
			s.set(working, ds.ReasonNoCurrentState, "waiting for the first observation of %s", s.ch.Runtime)
		}
		p.requeue(st.PollInterval)
		return
	case obs.Err != "":
		// A freeze holding a heal, or a soak under way, stays as it is (a
		// fetch error must not end the hold, nor restart the soak); the
		// error shows in the observation.
		soaking := inst.Status == ds.StatusConverging && inst.Reason == ds.ReasonLifecycleCheckPending
		if held := inst.Reason == ds.ReasonFrozen || soaking; !held {
			inst.Reason = ds.ReasonFetchFailed
			inst.Message = "fetch failed: " + obs.Err
		}
		p.requeue(st.PollInterval)
		return
	}
	if obs.Applying {
		s.set(working, ds.ReasonRuntimeObjectApplyNeeded, "applying %s to %s (attempt %d, started %s)", version, s.ch.Runtime, inst.ApplyAttempts, inst.LastApplyAt.UTC().Format(time.TimeOnly))
		p.requeue(st.PollInterval)
		return
	}
	state := obs.State
	converged := state.Version == version && state.Converged && !state.Drifted
	if !converged && !s.rollback && inst.Status != done && version == s.ch.Version && p.deploymentFailed(s, version) {
		return
	}
	switch {
	case state.Version == version && state.Failed:
		p.fail(s, version, ds.ReasonRuntimeObjectFailed, state.Message)
	case state.Version == version && state.Converged && !state.Drifted:
		if inst.Status != done && !s.rollback && version == s.ch.Version && p.soaking(s, version) {
			return
		}
		if inst.Status != done {
			p.event(inst, ds.EventConverged, "%s: %s converged", s.ch.Name, s.label(version))
			p.eventData(engstate.ConvergedData{Version: version, PreviousVersion: inst.CurrentVersion, Rollback: s.rollback})
		}
		if inst.CurrentVersion != version {
			switch {
			case s.rollback:
				// The version rolled back from is not one to return to.
				s.inst.PreviousStateID, s.inst.PreviousVersion = "", ""
			case inst.CurrentVersion != "":
				s.inst.PreviousStateID, s.inst.PreviousVersion = inst.CurrentStateID, inst.CurrentVersion
			}
			inst.CurrentStateID, inst.CurrentVersion = stateID, version
		}
		inst.ApplyAttempts = 0
		s.inst.ActionPending = false // drift went away by itself
		if inst.ConvergedAt.IsZero() || inst.Status != done {
			inst.ConvergedAt = p.in.Now
		}
		msg := version + " converged"
		if state.Message != "" {
			msg = state.Message
		}
		if s.rollback && s.inst.RollbackFrom != "" {
			msg = fmt.Sprintf("rolled back from %s to %s", s.inst.RollbackFrom, version)
			if s.inst.RollbackReason != "" {
				msg += " after: " + s.inst.RollbackReason
			}
		}
		s.set(done, ds.ReasonNone, "%s", msg)
		p.requeue(st.SteadyPollInterval)
	case state.Version == version && !state.Drifted:
		deadline := s.ch.ProgressDeadline.Duration
		if deadline == 0 {
			deadline = st.ProgressDeadline
		}
		// The deadline is for a rollout: not for a version seen converged
		// since its last apply (a soak, pods restarting later on).
		rolling := inst.ConvergedAt.IsZero() || inst.ConvergedAt.Before(inst.LastApplyAt)
		if rolling && !inst.LastApplyAt.IsZero() && p.in.Now.Sub(inst.LastApplyAt) > deadline {
			p.fail(s, version, ds.ReasonProgressDeadlineExceeded, fmt.Sprintf("%s did not converge within %s: %s", version, deadline, state.Message))
			return
		}
		reason := ds.ReasonUpdatingPods
		for _, o := range state.Objects {
			if o.Status == "FAILED" {
				reason = ds.ReasonUnhealthyPods
			}
		}
		s.set(working, reason, "%s", orDefault(state.Message, "rolling out "+version))
		p.requeue(st.PollInterval)
	default:
		p.mismatch(s, stateID, version, state, working, done)
	}
}

// mismatch handles a runtime that does not show the target version (or drifted).
func (p *planner) mismatch(s *step, stateID, version string, state runtimes.State, working, done ds.Status) {
	inst := s.inst
	running, drifted := state.Version, state.Drifted
	st := p.in.Settings
	if inst.Status == done || s.inst.ActionPending || inst.Reason == ds.ReasonFrozen {
		// It was converged: someone changed it out of band. Heal it now
		// (with everyAction, once that apply is approved; after a freeze
		// that holds healing).
		what := fmt.Sprintf("runtime runs %q instead of %s", running, version)
		if drifted {
			what = fmt.Sprintf("%s was changed outside drover", version)
		}
		if state.Message != "" {
			what += " (" + state.Message + ")" // the runtime says what and by whom
		}
		if f := p.frozen(s, true); f != nil {
			s.set(ds.StatusBlocked, ds.ReasonFrozen, "%s; not healed: %s", what, f.Describe())
			return
		}
		if s.ch.EveryAction && !s.rollback && !p.actionApproved(s) {
			p.awaitAction(s, what)
			return
		}
		s.inst.ActionPending = false
		s.inst.Healed++
		p.event(inst, ds.EventDrift, "%s: %s; re-applying", s.ch.Name, what)
		inst.ApplyAttempts = 0
		p.apply(s, stateID, version)
		return
	}
	if inst.ApplyAttempts >= st.MaxApplyAttempts && inst.Reason == ds.ReasonApplyFailed {
		p.apply(s, stateID, version) // fails it: no attempts left (or a permanent error)
		return
	}
	if inst.ApplyAttempts > 0 {
		since := p.in.Now.Sub(inst.LastApplyAt)
		grace := s.ch.ConvergenceGrace.Duration
		if grace == 0 {
			grace = st.ConvergenceGrace
		}
		switch {
		case inst.Reason == ds.ReasonApplyFailed:
			wait := applyBackoff(st, inst.ApplyAttempts)
			if since < wait {
				p.requeue(wait - since)
				return
			}
		case s.inst.AppliedAt.Before(inst.LastApplyAt):
			// The apply was planned but never recorded as done, and no task
			// is open for it: a desired state from before durable tasks
			// whose apply a crash interrupted. Apply again now.
		case since < grace:
			s.set(working, ds.ReasonVersionMismatch, "applied %s; waiting for the runtime to report it (runs %q)", version, running)
			p.requeue(min(st.PollInterval, grace-since))
			return
		}
	}
	p.apply(s, stateID, version)
}

// awaitAction asks for an approval of one apply (everyAction) and waits.
func (p *planner) awaitAction(s *step, what string) {
	if !s.inst.ActionPending {
		s.inst.ActionPending = true
		s.inst.ActionSeq++
		p.event(s.inst, ds.EventDrift, "%s: %s; waiting for approval to apply (%s)", s.ch.Name, what, ActionTopic(s.ch.Name, s.inst.ActionSeq))
	}
	s.set(ds.StatusWaitingManualApproval, ds.ReasonManualApprovalPending, "%s; approve the apply: drover approve %s --app %s --release-channel %s",
		what, s.inst.Service, s.inst.Application, s.ch.Name)
}

// actionApproved reports whether the pending everyAction apply is approved,
// and consumes the approval.
func (p *planner) actionApproved(s *step) bool {
	if !s.inst.ActionPending {
		return false
	}
	users, rejection := p.approvals(s.ch.Name, ActionTopic(s.ch.Name, s.inst.ActionSeq), false)
	if rejection != nil {
		// Rejected: do not apply this one; the next approval request gets a
		// new topic so a later approval can count.
		p.event(s.inst, ds.EventRejected, "%s: apply %s rejected by %s", s.ch.Name, ActionTopic(s.ch.Name, s.inst.ActionSeq), rejection.User)
		s.inst.ActionSeq++
		return false
	}
	if len(users) == 0 {
		return false
	}
	s.inst.ActionPending = false
	return true
}

// apply schedules an apply of the target, or fails the instance when the
// attempts are exhausted.
func (p *planner) apply(s *step, stateID, version string) {
	inst := s.inst
	st := p.in.Settings
	if inst.ApplyAttempts >= st.MaxApplyAttempts {
		msg := fmt.Sprintf("gave up after %d apply attempts", inst.ApplyAttempts)
		if inst.Message != "" && inst.Reason == ds.ReasonApplyFailed {
			msg += ": " + inst.Message
		}
		p.fail(s, version, ds.ReasonApplyFailed, msg)
		return
	}
	inst.ApplyAttempts++
	inst.LastApplyAt = p.in.Now
	working := ds.StatusConverging
	if s.rollback {
		working = ds.StatusRollingBack
	}
	s.set(working, ds.ReasonRuntimeObjectApplyNeeded, "applying %s to %s (attempt %d)", version, s.ch.Runtime, inst.ApplyAttempts)
	p.plan.Actions = append(p.plan.Actions, Action{Kind: ActionApply, ReleaseChannel: s.ch.Name, StateID: stateID, Version: version, Runtime: s.ch.Runtime, Rollback: s.rollback})
	p.event(inst, ds.EventApplying, "%s: applying %s (attempt %d)", s.ch.Name, version, inst.ApplyAttempts)
	p.requeue(st.PollInterval)
}

// fail marks the instance failed and starts an automatic rollback when allowed.
func (p *planner) fail(s *step, version string, reason ds.Reason, msg string) {
	inst := s.inst
	if msg == "" {
		msg = "rollout of " + version + " failed"
	}
	if s.rollback {
		s.set(ds.StatusFailedRollback, reason, "rollback to %s failed: %s", version, msg)
		p.event(inst, ds.EventFailed, "%s: rollback to %s failed: %s", s.ch.Name, version, msg)
		return
	}
	s.inst.FailedVersion = version
	s.set(ds.StatusFailed, reason, "%s", msg)
	p.event(inst, ds.EventFailed, "%s: %s failed: %s", s.ch.Name, version, msg)
	toState, toVersion := inst.CurrentStateID, inst.CurrentVersion
	if toVersion == version {
		toState, toVersion = s.inst.PreviousStateID, s.inst.PreviousVersion
	}
	if !s.ch.AutoRollback || toVersion == "" {
		return
	}
	p.event(inst, ds.EventRollback, "%s: rolling back from %s to %s (last converged)", s.ch.Name, version, toVersion)
	s.inst.RollbackFrom = version
	s.inst.RollbackReason = msg
	inst.TargetStateID, inst.TargetVersion = toState, toVersion
	inst.ApplyAttempts = 0
	s.rollback = true
	p.apply(s, toState, toVersion)
	if inst.Status == ds.StatusRollingBack {
		// Keep why it failed in view while rolling back.
		inst.Reason = reason
		inst.Message = fmt.Sprintf("%s failed (%s); rolling back to %s", version, msg, toVersion)
	}
}

// applyBackoff is the wait before apply attempt n+1.
func applyBackoff(st Settings, attempts int) time.Duration {
	return backoff(st.ApplyBackoff, st.MaxBackoff, attempts-1)
}

func instanceChanged(a, b store.Instance) bool {
	return a.DesiredStateID != b.DesiredStateID || a.TargetStateID != b.TargetStateID || a.TargetVersion != b.TargetVersion ||
		a.CurrentStateID != b.CurrentStateID || a.CurrentVersion != b.CurrentVersion || a.Status != b.Status ||
		a.Reason != b.Reason || a.Message != b.Message || a.Paused != b.Paused || a.ApplyAttempts != b.ApplyAttempts ||
		!a.LastApplyAt.Equal(b.LastApplyAt) || !a.ConvergedAt.Equal(b.ConvergedAt) ||
		a.PreviousStateID != b.PreviousStateID || a.PreviousVersion != b.PreviousVersion || a.DesiredVersion != b.DesiredVersion ||
		!slices.Equal(a.Satisfied, b.Satisfied) || a.RollbackFrom != b.RollbackFrom || a.RollbackReason != b.RollbackReason ||
		a.FailedVersion != b.FailedVersion || a.Healed != b.Healed || a.ActionSeq != b.ActionSeq ||
		a.ActionPending != b.ActionPending || !a.AppliedAt.Equal(b.AppliedAt) || !slices.EqualFunc(a.Checks, b.Checks, sameCheckResult)
}

func sameCheckResult(a, b store.CheckResult) bool {
	return a.Key == b.Key && a.DesiredStateID == b.DesiredStateID && a.Passed == b.Passed && a.Error == b.Error &&
		a.Message == b.Message && a.At.Equal(b.At) && a.Runs == b.Runs
}

func joinNames(names []string) string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return strings.Join(sorted, ", ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
