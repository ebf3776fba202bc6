package sqlite

import (
	"fmt"
	"testing"

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
