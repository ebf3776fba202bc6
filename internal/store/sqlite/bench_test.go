package sqlite

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// BenchmarkWriteBatch measures Write of a typical engine batch: 10 instance
// updates (with the revision check) and 10 events, one durable commit.
func BenchmarkWriteBatch(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ctx := b.Context()
	batch := &store.Batch{}
	for i := range 10 {
		batch.Instances = append(batch.Instances, store.Instance{Application: "shop", Service: fmt.Sprint("svc", i),
			ReleaseChannel: "production", DesiredStateID: "ds-1", Status: "progressing", Message: "applying 1.2.3",
			Satisfied: []string{"staging@1.2.3", "canary@1.2.3"}})
	}
	if err := s.Write(ctx, batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		batch.Events = batch.Events[:0]
		for i := range 10 {
			batch.Events = append(batch.Events, store.Event{Application: "shop", Service: fmt.Sprint("svc", i),
				ReleaseChannel: "production", Type: "applying", Message: "applying 1.2.3", Data: []byte(`{"attempt": 1}`)})
		}
		if err := s.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
}

// BenchmarkAppendEvents measures AppendEvents of one event (one durable commit each).
func BenchmarkAppendEvents(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.AppendEvents(ctx, store.Event{Application: "shop", Service: "web", Type: "applied", Message: "applied 1.2.3"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendEventsParallel is BenchmarkAppendEvents from GOMAXPROCS
// goroutines: they queue for the single write connection.
func BenchmarkAppendEventsParallel(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ctx := b.Context()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.AppendEvents(ctx, store.Event{Application: "shop", Service: "web", Type: "applied", Message: "applied 1.2.3"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReadWhileWriting measures ListInstances while another goroutine
// writes continuously: WAL readers do not wait for the writer.
func BenchmarkReadWhileWriting(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ctx := b.Context()
	batch := &store.Batch{}
	for i := range 10 {
		batch.Instances = append(batch.Instances, store.Instance{Application: "shop", Service: fmt.Sprint("svc", i), ReleaseChannel: "production"})
	}
	if err := s.Write(ctx, batch); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := s.AppendEvents(ctx, store.Event{Type: "tick"}); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		list, err := s.ListInstances(ctx, "shop", "")
		if err != nil || len(list) != 10 {
			b.Fatal(len(list), err)
		}
	}
	close(done)
	<-writerDone
}

// BenchmarkRolloutSteps measures the writes of an engine rolling services
// out through a chain of release channels, as `drover bench` drives it but
// without the engine: each step is one fenced Write that completes the
// previous channel's apply task, marks that channel converged with its
// observation, moves the next one to applying with its task enqueued
// claimed, and appends the four events of a step. Eight writers run at once
// (the engine's default workers), so the writes commit in groups as the
// engine's do. One op is one step.
func BenchmarkRolloutSteps(b *testing.B) {
	const services, channels, writers = 10000, 10, 8
	s, _ := openTemp(b)
	defer s.Close()
	ctx := b.Context()
	type service struct {
		name  string
		fence store.Fence
		insts []store.Instance
		step  int
		open  *store.Task
	}
	// The services, their leases and instances, as a push leaves them.
	all := make([]*service, services)
	var (
		claims  sync.WaitGroup
		claimed = make(chan struct{}, writers)
		lost    atomic.Value
	)
	for i := range all {
		sv := &service{name: fmt.Sprintf("svc-%d", i)}
		all[i] = sv
		claimed <- struct{}{}
		claims.Go(func() {
			defer func() { <-claimed }()
			l, err := s.ClaimLease(ctx, "service/bench/"+sv.name, "bench", time.Hour)
			if err != nil {
				lost.CompareAndSwap(nil, err)
			}
			sv.fence = store.Fence{Key: "service/bench/" + sv.name, Token: l.Token}
		})
		for c := range channels {
			sv.insts = append(sv.insts, store.Instance{Application: "bench", Service: sv.name,
				ReleaseChannel: fmt.Sprintf("rc-%d", c), DesiredStateID: "ds-0", Status: ds.StatusWaitingPreconditions,
				Reason: ds.ReasonReleaseChannelDependencyUnmet, Message: "waiting for the channel before"})
		}
	}
	claims.Wait()
	if err, _ := lost.Load().(error); err != nil {
		b.Fatal(err)
	}
	for chunk := range slices.Chunk(all, 500) {
		batch := &store.Batch{}
		for _, sv := range chunk {
			batch.Instances = append(batch.Instances, sv.insts...)
		}
		if err := s.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	free := make(chan *service, services)
	for _, sv := range all {
		for c := range sv.insts {
			sv.insts[c].Revision = 1
		}
		free <- sv
	}
	now := time.Now()
	event := func(sv *service, rc string, typ ds.EventType, msg string) store.Event {
		return store.Event{Time: now, Application: "bench", Service: sv.name, ReleaseChannel: rc, DesiredStateID: "ds-1",
			Type: typ, Actor: "engine", Message: msg}
	}
	step := func(sv *service) error {
		// The engine reads the instances at each pass (from the store's
		// cache), which also lets Write send only the changed columns.
		if _, err := s.ListInstances(ctx, "bench", sv.name); err != nil {
			return err
		}
		c := sv.step % channels
		version := fmt.Sprintf("v-%d", sv.step/channels)
		batch := &store.Batch{Fence: &sv.fence, Claim: &store.TaskClaim{Owner: "bench", TTL: time.Hour}}
		prev := &sv.insts[(c+channels-1)%channels]
		next := &sv.insts[c]
		if sv.open != nil {
			batch.Complete = []store.TaskDone{{Task: *sv.open, Status: store.TaskSucceeded, Message: "applied"}}
			prev.Status, prev.Reason, prev.Message = ds.StatusConverged, "", version+" converged"
			prev.CurrentVersion, prev.ConvergedAt = prev.TargetVersion, now
			batch.Instances = append(batch.Instances, *prev)
			batch.Observations = []store.Observation{{Application: "bench", Service: sv.name, ReleaseChannel: prev.ReleaseChannel,
				DesiredStateID: "ds-1", TargetVersion: version, Version: version, Converged: true, Message: version + " running: 2/2 replicas available",
				Objects: []store.ObservedObject{{ObjectType: "Deployment.apps", Name: "svc", Version: version, Replicas: 2, AvailableReplicas: 2, TargetReplicas: 2}},
				Since:   now}}
			batch.Events = append(batch.Events, event(sv, prev.ReleaseChannel, ds.EventApplied, "applied "+version),
				event(sv, prev.ReleaseChannel, ds.EventConverged, version+" converged"))
		}
		next.Status, next.Reason, next.Message = ds.StatusConverging, "", "applying "+version
		next.TargetVersion, next.LastApplyAt, next.ApplyAttempts = version, now, 1
		batch.Instances = append(batch.Instances, *next)
		batch.Events = append(batch.Events, event(sv, next.ReleaseChannel, ds.EventStarted, "rolling out "+version),
			event(sv, next.ReleaseChannel, ds.EventApplying, "applying "+version))
		batch.Tasks = []store.Task{{Key: "bench/" + sv.name, Instance: next.ReleaseChannel, Kind: "engine.apply",
			Payload: []byte(`{"kind":"apply","releaseChannel":"` + next.ReleaseChannel + `","version":"` + version + `"}`)}}
		if err := s.Write(ctx, batch); err != nil {
			return err
		}
		for _, in := range batch.Instances {
			for i := range sv.insts {
				if sv.insts[i].ReleaseChannel == in.ReleaseChannel {
					sv.insts[i].Revision++
				}
			}
		}
		sv.open = &batch.Tasks[0]
		sv.step++
		return nil
	}
	var (
		left atomic.Int64
		wg   sync.WaitGroup
		fail atomic.Value
	)
	b.ReportAllocs()
	b.ResetTimer()
	left.Store(int64(b.N))
	for range writers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				sv := <-free
				err := step(sv)
				free <- sv
				if err != nil {
					fail.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := fail.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}
