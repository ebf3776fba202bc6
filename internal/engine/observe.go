package engine

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// Observations: each pass records what the runtimes reported of a service's
// instances (fetch or watch, and getInfo) in the store, so that what people
// read never asks a runtime. An observation is written only when what is
// seen changes; the engine remembers a fingerprint of what it last wrote per
// instance (loaded from the store the first time it plans a service).

// observed remembers, per service key, the fingerprints of the stored
// observations by release channel.
type observed struct {
	mu   sync.Mutex
	seen map[string]fingerprints
}

// fingerprints are a service's stored observations' fingerprints by
// release channel: a service has a handful of channels, kept in one small
// slice (the loop keeps one for every service, and a slice is one object
// for the collector to walk where a map is several). Never changed once
// made: a change makes a new one.
type fingerprints []channelFingerprint

type channelFingerprint struct {
	channel string
	sum     uint64
}

// of returns the fingerprint of channel's observation, 0 if none.
func (fs fingerprints) of(channel string) uint64 {
	for _, f := range fs {
		if f.channel == channel {
			return f.sum
		}
	}
	return 0
}

// with returns fs with the fingerprints of obs set.
func (fs fingerprints) with(obs []store.Observation) fingerprints {
	next := make(fingerprints, len(fs), len(fs)+len(obs))
	copy(next, fs)
	for _, o := range obs {
		f := channelFingerprint{channel: o.ReleaseChannel, sum: fingerprint(o)}
		if i := slices.IndexFunc(next, func(x channelFingerprint) bool { return x.channel == f.channel }); i >= 0 {
			next[i] = f
		} else {
			next = append(next, f)
		}
	}
	return slices.Clip(next)
}

// fingerprintSeed keys fingerprints, which live in this process only.
var fingerprintSeed = maphash.MakeSeed()

// fingerprint hashes what an observation records (not its key nor Since):
// every field, each string with its length so that no two observations
// hash alike by moving text from one field to the next. (A test checks it
// covers every field of the types.)
func fingerprint(o store.Observation) uint64 {
	var (
		h   maphash.Hash
		buf [8]byte
	)
	h.SetSeed(fingerprintSeed)
	num := func(n int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(n)) //nolint:gosec // G115: the bits are hashed, a negative number as well as any
		_, _ = h.Write(buf[:])
	}
	str := func(s string) {
		num(int64(len(s)))
		_, _ = h.WriteString(s)
	}
	flag := func(b bool) {
		if b {
			_ = h.WriteByte(1)
		} else {
			_ = h.WriteByte(0)
		}
	}
	str(o.DesiredStateID)
	str(o.TargetVersion)
	str(o.Version)
	flag(o.Converged)
	flag(o.Failed)
	flag(o.Drifted)
	str(o.Message)
	str(o.Error)
	num(int64(len(o.Objects)))
	for _, x := range o.Objects {
		str(x.ObjectType)
		str(x.Namespace)
		str(x.Name)
		str(x.Version)
		num(int64(x.Replicas))
		num(int64(x.AvailableReplicas))
		num(int64(x.TargetReplicas))
		str(x.Status)
		str(x.Message)
	}
	num(int64(len(o.Info)))
	for _, x := range o.Info {
		str(x.Name)
		str(x.Text)
	}
	return h.Sum64()
}

// knownObservations returns the fingerprints of the service's stored observations,
// reading them from the store the first time.
func (l *Loop) knownObservations(ctx context.Context, key, app, svc string) (fingerprints, error) {
	l.observed.mu.Lock()
	seen, ok := l.observed.seen[key]
	l.observed.mu.Unlock()
	if ok {
		return seen, nil
	}
	list, err := l.store.ListObservations(ctx, app, svc)
	if err != nil {
		return nil, err
	}
	seen = fingerprints(nil).with(list)
	l.observed.mu.Lock()
	l.observed.seen[key] = seen
	l.observed.mu.Unlock()
	return seen, nil
}

// rememberObservations records that obs were written for the service.
func (l *Loop) rememberObservations(key string, seen fingerprints, obs []store.Observation) {
	next := seen.with(obs)
	l.observed.mu.Lock()
	l.observed.seen[key] = next
	l.observed.mu.Unlock()
}

// forgetObservations drops what the loop remembers of a service (another
// engine may write its observations now).
func (l *Loop) forgetObservations(key string) {
	l.observed.mu.Lock()
	delete(l.observed.seen, key)
	l.observed.mu.Unlock()
}

// observation is the store form of one fetch of target (err: the fetch
// failed), with the runtime's getInfo outputs when it has them.
func observation(ctx context.Context, rt runtimes.Runtime, target runtimes.Target, st runtimes.State, fetchErr error) store.Observation {
	o := store.Observation{
		Application: target.Application, Service: target.Service, ReleaseChannel: target.ReleaseChannel,
		DesiredStateID: target.DesiredStateID, TargetVersion: target.Version,
	}
	if fetchErr != nil {
		o.Error = fetchErr.Error()
	} else {
		o.Version, o.Converged, o.Failed, o.Drifted, o.Message = st.Version, st.Converged, st.Failed, st.Drifted, st.Message
		for _, obj := range st.Objects {
			o.Objects = append(o.Objects, store.ObservedObject{
				ObjectType: obj.ObjectType, Namespace: obj.Namespace, Name: obj.Name, Version: obj.Version,
				Replicas: obj.Replicas, AvailableReplicas: obj.AvailableReplicas, TargetReplicas: obj.TargetReplicas,
				Status: string(obj.Status), Message: obj.Message,
			})
		}
	}
	if ig, ok := rt.(runtimes.InfoGetter); ok {
		ictx, cancel := context.WithTimeout(ctx, infoTimeout)
		outs, err := ig.Info(ictx, target.InstanceKey)
		cancel()
		if err != nil {
			o.Info = []store.ObservedInfo{{Name: "error", Text: "getInfo failed: " + err.Error()}}
		}
		for _, out := range outs {
			o.Info = append(o.Info, store.ObservedInfo{Name: out.Name, Text: out.Text})
		}
	}
	return o
}

// infoTimeout bounds a runtime's answer to getInfo (it answers from what it
// has; a slow one is left out of the observation).
const infoTimeout = 2 * time.Second
