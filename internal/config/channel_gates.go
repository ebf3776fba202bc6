package config

import "sync"

// ChannelGateCheck validates the config of a gate kind that a release
// channel carries (drover's, such as alertGate): p is the channel's field
// path ("application.releaseChannels[1]"), and add reports a problem at a
// field below it, by path, so that it is shown at its file and line.
type ChannelGateCheck func(rc *ReleaseChannel, p string, add func(field, msg string))

var (
	channelGateChecksMu sync.RWMutex
	channelGateChecks   []ChannelGateCheck
)

// RegisterChannelGateCheck adds the validation of a gate kind that lives
// outside this package (its config field is here; its check, compile hook
// and evaluator are its own). Call it from an init function. Every
// release channel is checked with it, in templates too.
func RegisterChannelGateCheck(check ChannelGateCheck) {
	channelGateChecksMu.Lock()
	defer channelGateChecksMu.Unlock()
	channelGateChecks = append(channelGateChecks, check)
}

// channelGates runs the registered gate kinds' checks on rc.
func (v *validator) channelGates(src *Source, p string, rc *ReleaseChannel) {
	channelGateChecksMu.RLock()
	checks := channelGateChecks
	channelGateChecksMu.RUnlock()
	for _, check := range checks {
		check(rc, p, func(field, msg string) { v.add(src, field, "%s", msg) })
	}
}
