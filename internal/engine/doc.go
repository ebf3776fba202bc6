// Package engine is drover's convergence engine: it continuously compares
// each service's desired state with what its runtimes report and applies, in
// the declared order, once preconditions hold.
//
// It is split the way Nomad's scheduler and etcd's raft are: PlanService is a
// pure function (no I/O, no clock) from (desired state, instances, observations,
// approvals, now) to a Plan of instance updates, events and applies; a pass
// of the Loop is four steps (pass.go): read the state, observe the runtimes,
// plan, and commit the plan durably with its tasks, which the runner then
// carries out. The rules of people's requests are in package requests. Work is level-triggered: the queue carries service
// keys, and every pass re-reads everything, so lost or duplicate triggers are
// harmless. See README.md in this directory for the flow and vocabulary.
package engine
