package config

import "time"

// MinPollInterval is the shortest poll or retry interval a config may ask
// for. Shorter ones would make drover fork a command in a tight loop (a fetch
// with pollInterval 1ns used most of a CPU); 0 keeps the default.
const MinPollInterval = time.Second

// interval refuses a poll or retry interval below MinPollInterval.
func (v *validator) interval(src *Source, path string, d Duration) {
	if d.Duration > 0 && d.Duration < MinPollInterval {
		v.add(src, path, "%s is too short: poll and retry intervals must be at least %v (or 0 for the default)", d, MinPollInterval)
	}
}

func (v *validator) retryPolicy(src *Source, path string, rp *RetryPolicy) {
	if rp != nil {
		v.interval(src, path+".baseInterval", rp.BaseInterval)
	}
}

// runtimeIntervals checks the poll and retry intervals of a runtime.
func (v *validator) runtimeIntervals(src *Source, rt *Runtime) {
	if c := rt.Custom; c != nil {
		const p = "runtime.custom"
		if c.Apply != nil {
			v.retryPolicy(src, p+".apply.retryPolicy", c.Apply.RetryPolicy)
		}
		if f := c.Fetch; f != nil {
			v.interval(src, p+".fetch.pollInterval", f.PollInterval)
			v.interval(src, p+".fetch.steadyStatePollInterval", f.SteadyStatePollInterval)
			v.retryPolicy(src, p+".fetch.retryPolicy", f.RetryPolicy)
		}
		if g := c.GetInfo; g != nil {
			v.interval(src, p+".getInfo.pollInterval", g.PollInterval)
			v.retryPolicy(src, p+".getInfo.retryPolicy", g.RetryPolicy)
		}
	}
	if t := rt.TerraformRunner; t != nil {
		const p = "runtime.terraformRunner"
		v.interval(src, p+".pollInterval", t.PollInterval)
		v.interval(src, p+".steadyStatePollInterval", t.SteadyStatePollInterval)
		v.retryPolicy(src, p+".fetchRetryPolicy", t.FetchRetryPolicy)
		v.retryPolicy(src, p+".applyRetryPolicy", t.ApplyRetryPolicy)
	}
	if e := rt.AwsEcs; e != nil {
		v.interval(src, "runtime.awsEcs.pollInterval", e.PollInterval)
		v.interval(src, "runtime.awsEcs.steadyStatePollInterval", e.SteadyStatePollInterval)
	}
}
