// Package engine is drover's convergence engine: it continuously compares
// each service's desired state with what its runtimes report and applies, in
// the declared order, once preconditions hold.
//
// It is split the way Nomad's scheduler and etcd's raft are: PlanService is a
// pure function (no I/O, no clock) from (desired state, instances, observations,
// approvals, now) to a Plan of instance updates, events and applies; the Loop
// reads state, observes runtimes, plans, writes the plan durably and only then
// performs the applies. Work is level-triggered: the queue carries service
// keys, and every pass re-reads everything, so lost or duplicate triggers are
// harmless. See README.md in this directory for the flow and vocabulary.
package engine
