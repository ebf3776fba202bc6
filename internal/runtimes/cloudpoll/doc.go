// Package cloudpoll is the observation machinery the cloud runtimes
// (awsEcs, awsLambda, googleCloudRun) share: a table of the instances a
// runtime was asked about, a poller goroutine that observes them through
// the cloud's API on two beats, and the fan-out of "this instance may have
// changed" to the engine's Watch calls.
//
// A runtime gives a Poller what is its own (Config): how to tell whether
// two targets of an instance are the same (Same), and how to observe a
// batch of instances (Describe: ECS describes ten services per
// DescribeServices call, Lambda and Cloud Run read one at a time, which
// OneAtATime adapts). The Poller owns the rest.
//
// # The instance table
//
// Fetch and Apply record the target an instance is polled for (Touch). A
// target that is not the same as before (another version, or Same says the
// spec differs) drops the instance's observation, so the next Fetch
// observes it at once rather than return a state of the old target; each
// such change, and each apply (Applied), bumps the instance's generation,
// and an observation started for an older generation is not kept. Fetch
// otherwise returns the latest observation without calling the API.
//
// # Two beats
//
// The poller observes every pollInterval the instances not converged, and
// every steadyStatePollInterval all of them (an observation that is an
// error is not converged); an instance not observed yet goes at once. The
// beats are the runtime's, not each instance's, so the instances of one
// beat share the calls of a batching backend. An instance nobody fetched
// for ForgetAfter, or three steady intervals if that is longer, is
// forgotten: the engine fetches each instance of a desired state every few
// minutes. Applied wakes the poller at once.
//
// # Watchers
//
// An observation that differs from the one before (its state, its error
// text), and the first one, notifies the watchers (runtimes.Notifier), as
// a runtime's Apply does through Notify. Watch calls end when the Poller
// closes.
package cloudpoll
