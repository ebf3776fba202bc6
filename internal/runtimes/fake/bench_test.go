package fake

import (
	"fmt"
	"testing"

	"github.com/drover-dev/drover/internal/runtimes"
)

// BenchmarkApplyFetch applies and fetches over 10,000 instances on a
// zero-delay fake runtime, as the engine benchmark does: one op is one
// Apply plus one Fetch. cpu-ns/op is the process's CPU time per op (all
// goroutines, the saver's included), steadier than ns/op on a busy machine.
//
//   - changed: every apply is a new version (objects decoded, diffed, rollout started)
//   - unchanged: every apply re-applies what runs (the idempotent path)
//   - changed-persisted: as changed, with the state saved to a data directory
func BenchmarkApplyFetch(b *testing.B) {
	const keys = 10_000
	versions := [2][]runtimes.Target{make([]runtimes.Target, keys), make([]runtimes.Target, keys)}
	for i := range keys {
		k := runtimes.InstanceKey{Application: "bench", Service: fmt.Sprintf("svc-%d", i/10), ReleaseChannel: fmt.Sprintf("rc-%d", i%10)}
		versions[0][i] = target(b, k, "v1")
		versions[1][i] = target(b, k, "v2")
	}
	for _, bc := range []struct {
		name      string
		changed   bool
		persisted bool
	}{
		{"changed", true, false},
		{"unchanged", false, false},
		{"changed-persisted", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opts := runtimes.Options{}
			if bc.persisted {
				opts.DataDir = b.TempDir()
			}
			r := NewWithSettings("bench", Settings{}, opts)
			defer func() {
				if err := r.Close(); err != nil {
					b.Error(err)
				}
			}()
			ctx := b.Context()
			for _, tg := range versions[0] {
				if _, err := r.Apply(ctx, tg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu := cpuTime()
			i := 0
			for b.Loop() {
				tg := &versions[0][i%keys]
				if bc.changed {
					tg = &versions[(i/keys+1)%2][i%keys]
				}
				if _, err := r.Apply(ctx, *tg); err != nil {
					b.Fatal(err)
				}
				st, err := r.Fetch(ctx, *tg)
				if err != nil {
					b.Fatal(err)
				}
				if !st.Converged {
					b.Fatalf("%s: %+v", tg.InstanceKey, st)
				}
				i++
			}
			if cpu > 0 {
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
