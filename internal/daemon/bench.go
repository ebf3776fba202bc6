package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/fake"
	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store/postgres"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

func newBenchCmd() *cobra.Command {
	var (
		sizes                                     []int
		channels, workers, rounds                 int
		replicas                                  int
		data, database                            string
		timeout                                   time.Duration
		output, cpuProfile, memProfile, traceFile string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the engine: N services x M release channels on zero-delay fake runtimes",
		Long: `Bench starts an in-process server on a fresh embedded database, applies an
application whose M release channels each follow the previous one
(releaseChannelStable), one zero-delay fake runtime per channel and N services,
pushes every service at once through the API, and measures the time until every
service is converged in every channel, with the CPU time and peak memory of
the process and the CPU the garbage collector took of it (its marking on
otherwise idle CPUs aside) in how many cycles.

With --database (an empty PostgreSQL database) the servers keep their state in
it, and --replicas N runs N servers in the process sharing it (and the fake
runtimes), with the pushes spread over them.

With several sizes (--services 1000,10000) or --rounds, each run is a process
of its own, on a fresh temporary database: every round runs each size in turn,
then the report gives the medians of each size and, for each size against the
smallest, how many times the time the services took (the ratio of the median
convergence times, and its range within rounds). On a machine whose speed
varies, take several rounds.`,
		Example: `  drover bench --services 1000 --channels 10
  drover bench --services 1000,10000 --channels 10 --rounds 5
  drover bench --services 1000 --channels 10 --database postgres://drover@127.0.0.1/bench --replicas 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.OutputFormat(output, "text", "json"); err != nil {
				return err
			}
			for _, n := range sizes {
				if n < 1 {
					return cli.UsageErrorf("invalid --services %d: at least 1", n)
				}
			}
			if rounds < 1 {
				return cli.UsageErrorf("invalid --rounds %d: at least 1", rounds)
			}
			if len(sizes) > 1 || rounds > 1 {
				for _, f := range [][2]string{{"--data", data}, {"--database", database}, {"--cpuprofile", cpuProfile}, {"--memprofile", memProfile}, {"--trace", traceFile}} {
					if f[1] != "" {
						return cli.UsageErrorf("%s measures one run: not with several sizes or rounds", f[0])
					}
				}
				if replicas != 1 {
					return cli.UsageErrorf("--replicas needs --database: not with several sizes or rounds")
				}
				progress := cmd.OutOrStdout()
				if output == "json" {
					progress = cmd.ErrOrStderr()
				}
				rep, err := runBenchSeries(cmd.Context(), sizes, rounds, channels, workers, timeout, progress)
				if err != nil {
					return err
				}
				return writeBench(cmd.OutOrStdout(), output, rep, func(w io.Writer) { printBenchReport(w, rep) })
			}
			services := sizes[0]
			if data == "" {
				dir, err := os.MkdirTemp("", "drover-bench-")
				if err != nil {
					return err
				}
				defer func() { _ = os.RemoveAll(dir) }()
				data = dir
			}
			if replicas < 1 || (replicas > 1 && database == "") {
				return cli.UsageErrorf("invalid --replicas %d: at least 1, and more than 1 only with --database", replicas)
			}
			res, err := runBench(cmd.Context(), benchSetup{data: data, database: database, replicas: replicas, cpuProfile: cpuProfile, memProfile: memProfile, trace: traceFile}, services, channels, workers, timeout)
			if err != nil {
				return err
			}
			return writeBench(cmd.OutOrStdout(), output, res, func(w io.Writer) { printBench(w, res) })
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&sizes, "services", []int{1000}, "number of services; several (1000,10000) run each in turn and compare them")
	f.IntVar(&rounds, "rounds", 1, "runs of each size, taken in turn (the report gives their medians)")
	f.IntVar(&channels, "channels", 10, "release channels per service (a chain)")
	f.IntVar(&workers, "workers", engine.DefaultWorkers(), "engine workers: services reconciled in parallel (4 per CPU, at least 8, unless set)")
	f.StringVar(&data, "data", "", "data directory (default: a temporary one, removed afterwards)")
	f.StringVar(&database, "database", "", "an empty PostgreSQL database to keep the state in, instead of the data directory's SQLite")
	f.IntVar(&replicas, "replicas", 1, "servers sharing --database (the pushes are spread over them)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of what is measured (the first push until everything converged) to this file")
	f.StringVar(&traceFile, "trace", "", "write an execution trace of what is measured (go tool trace reads it: where goroutines wait, the collector's phases) to this file")
	f.StringVar(&memProfile, "memprofile", "", "write a heap profile (allocations of the whole run, and what the servers hold once everything converged) to this file")
	return cmd
}

// writeBench writes v as JSON (output "json"), else as text prints it.
func writeBench(w io.Writer, output string, v any, text func(io.Writer)) error {
	if output == "json" {
		return cli.WriteJSON(w, v)
	}
	text(w)
	return nil
}

// startRecording starts writing what start records (a CPU profile, an
// execution trace) to path, or does nothing for an empty path; the
// returned function ends it.
func startRecording(path string, start func(io.Writer) error, end func()) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		end()
		_ = f.Close()
	}, nil
}

// writeHeapProfile writes the heap profile after a garbage collection, so
// its in-use figures are current.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write heap profile: %w", err)
	}
	return f.Close()
}

type benchResult struct {
	Services        int     `json:"services"`
	Channels        int     `json:"channels"`
	Instances       int     `json:"instances"`
	ApplySeconds    float64 `json:"applyConfigsSeconds"`
	PushSeconds     float64 `json:"pushSeconds"`
	ConvergeSeconds float64 `json:"convergeSeconds"`
	CPUSeconds      float64 `json:"cpuSeconds"`
	// GCSeconds is the CPU the garbage collector took from the rest
	// (marking, assists, pauses), without what its workers ran on
	// otherwise idle CPUs; GCCycles is how many times it ran.
	GCSeconds       float64 `json:"gcCpuSeconds"`
	GCCycles        uint64  `json:"gcCycles"`
	PeakRSSMiB      float64 `json:"peakRssMiB"`
	InstancesPerSec float64 `json:"instancesPerSecond"`
}

func printBench(w io.Writer, r *benchResult) {
	fmt.Fprintf(w, "services x channels:   %d x %d (%d instances)\n", r.Services, r.Channels, r.Instances)
	fmt.Fprintf(w, "apply configs:         %.2fs\n", r.ApplySeconds)
	fmt.Fprintf(w, "push all:              %.2fs\n", r.PushSeconds)
	fmt.Fprintf(w, "push -> all converged: %.2fs (%.0f instances/s)\n", r.ConvergeSeconds, r.InstancesPerSec)
	fmt.Fprintf(w, "CPU time:              %.2fs (garbage collection %.2fs in %d cycles)\n", r.CPUSeconds, r.GCSeconds, r.GCCycles)
	fmt.Fprintf(w, "peak RSS:              %.0f MiB\n", r.PeakRSSMiB)
}

func benchConfigs(services, channels int) ([]apiv1.Config, error) {
	var files []*config.File
	app := &config.Application{Name: "bench"}
	for i := range channels {
		name := fmt.Sprintf("rc-%d", i)
		files = append(files, &config.File{Runtime: &config.Runtime{Name: name, Fake: &config.FakeRuntime{}}})
		rc := config.ReleaseChannel{Name: name, Runtimes: []config.RuntimeConnection{{Runtime: name}}}
		if i > 0 {
			rc.Preconditions = []config.Precondition{{ReleaseChannelStable: &config.ReleaseChannelStable{ReleaseChannel: fmt.Sprintf("rc-%d", i-1)}}}
		}
		app.ReleaseChannels = append(app.ReleaseChannels, rc)
	}
	files = append(files, &config.File{Application: app})
	manifest := `apiVersion: apps/v1
kind: Deployment
metadata: {name: svc}
spec:
  replicas: 2
  selector: {matchLabels: {app: svc}}
  template:
    metadata: {labels: {app: svc}}
    spec:
      containers: [{name: svc, image: "{{.Params.image}}"}]
`
	for s := range services {
		files = append(files, &config.File{Service: &config.Service{
			Name: fmt.Sprintf("svc-%d", s), Application: "bench",
			ServiceBackend: config.ServiceBackend{KubernetesConfig: &config.KubernetesConfig{Type: config.KubernetesTypeKubernetes, Inlined: manifest}},
			Parameters: []config.ParameterDefinition{{Name: "image", Required: true, DockerImage: &config.DockerImageParameter{
				ImageRegistryInfo: &config.ImageRegistryInfo{ContainerRegistry: "ghcr.io", ImageRepository: "acme/svc"}}}},
		}})
	}
	out := make([]apiv1.Config, len(files))
	for i, f := range files {
		body, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		out[i] = apiv1.Config{Source: fmt.Sprintf("bench-%d.pvn.yaml", i), Body: body}
	}
	return out, nil
}

// benchSetup is where a bench keeps its state: data (a directory), and
// database with replicas servers sharing it (or the directory's SQLite).
type benchSetup struct {
	data, database string
	replicas       int
	// cpuProfile is where to write the CPU profile of what is measured,
	// from the first push until every instance converged ("" = none).
	cpuProfile string
	// trace is where to write an execution trace of what is measured
	// ("" = none).
	trace string
	// memProfile is where to write the heap profile once every instance
	// converged, with the servers still running ("" = none).
	memProfile string
}

// benchKeys is the keyring of the bench's stores, as a server's seals
// configs and desired states at rest (one for every replica).
var benchKeys = sync.OnceValue(func() *sealing.Keyring {
	k, err := sealing.ParseKeyring(sealing.NewKey())
	if err != nil {
		panic(err) // a new key always parses
	}
	return k
})

// benchStore opens one server's store for the bench.
func (b benchSetup) store(ctx context.Context) (closingStore, error) {
	if b.database == "" {
		// The data directory's own keyring, as a server's: a server
		// started on a kept --data reads what the bench wrote.
		text, err := ownKeyring(filepath.Join(b.data, secretsKeyFile), slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, err
		}
		keys, err := sealing.ParseKeyring(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(b.data, secretsKeyFile), err)
		}
		return sqlite.Open(ctx, filepath.Join(b.data, "drover.db"), sqlite.WithSealer(keys))
	}
	return postgres.Open(ctx, b.database, postgres.WithSealer(benchKeys()))
}

func runBench(ctx context.Context, setup benchSetup, services, channels, workers int, timeout time.Duration) (res *benchResult, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The fake runtimes are zero-delay and in memory, one of each for all
	// servers, as one backend is: the simulated backend keeps its state
	// the way a real one would, outside drover, so the bench measures
	// drover alone (a fake runtime with a data directory rewrites its whole
	// state file as it changes).
	var fakesMu sync.Mutex
	fakes := map[string]runtimes.Runtime{}
	registry := runtimehost.Registry{"fake": func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		fakesMu.Lock()
		defer fakesMu.Unlock()
		if rt, ok := fakes[cfg.Name]; ok {
			return rt, nil
		}
		opts.DataDir = ""
		rt, err := fake.Open(cfg.Name, fake.Settings{}, opts)
		if err == nil {
			fakes[cfg.Name] = rt
		}
		return rt, err
	}}
	settings := engine.DefaultSettings()
	token := auth.NewToken()
	edge := server.EdgeConfig{Auth: auth.NewTokenAuthenticator(token, auth.LocalIdentity)}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var clients []*client.Client
	for i := range setup.replicas {
		st, err := setup.store(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = st.Close() }()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		dataDir := filepath.Join(setup.data, fmt.Sprintf("replica-%d", i))
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, err
		}
		shared := setup.database != ""
		node := New(Config{Store: st, DataDir: dataDir, Settings: settings, Registry: registry, Workers: workers,
			Log: slog.New(slog.DiscardHandler), Edge: edge, Shared: shared, StoreKind: map[bool]string{true: "postgres", false: "sqlite"}[shared]})
		done := make(chan error, 1)
		go func() { done <- node.Run(runCtx, ln) }()
		defer func() {
			stop()
			if serr := <-done; serr != nil && err == nil {
				res, err = nil, fmt.Errorf("bench server: %w", serr)
			}
		}()
		clients = append(clients, client.New("http://"+ln.Addr().String(), client.WithToken(token)))
	}
	c := clients[0]

	configs, err := benchConfigs(services, channels)
	if err != nil {
		return nil, err
	}
	res = &benchResult{Services: services, Channels: channels, Instances: services * channels}
	start := time.Now()
	if _, err := c.ApplyConfigs(ctx, apiv1.ApplyConfigsRequest{Configs: configs}); err != nil {
		return nil, cli.APIError(err)
	}
	res.ApplySeconds = time.Since(start).Seconds()

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	allConverged := followConverged(watchCtx, c, res.Instances)

	stopProfile, err := startRecording(setup.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	stopTrace, err := startRecording(setup.trace, trace.Start, trace.Stop)
	if err != nil {
		return nil, err
	}
	defer stopTrace()
	cpu0, gc0 := cpuTime(), readGC()
	pushStart := time.Now()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Value
	)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= services {
					return
				}
				_, err := clients[i%len(clients)].Push(ctx, "bench", fmt.Sprintf("svc-%d", i), apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.0"}}})
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return nil, cli.APIError(err)
	}
	res.PushSeconds = time.Since(pushStart).Seconds()
	if err := waitConverged(ctx, c, services, channels, allConverged); err != nil {
		return nil, err
	}
	stopWatch()
	res.ConvergeSeconds = time.Since(pushStart).Seconds()
	res.CPUSeconds = (cpuTime() - cpu0).Seconds()
	gc := readGC()
	res.GCSeconds, res.GCCycles = gc.seconds-gc0.seconds, gc.cycles-gc0.cycles
	pprof.StopCPUProfile() // what is measured ends here (stopping again is a no-op)
	if setup.memProfile != "" {
		if err := writeHeapProfile(setup.memProfile); err != nil {
			return nil, err
		}
	}
	res.InstancesPerSec = float64(res.Instances) / res.ConvergeSeconds
	res.PeakRSSMiB = peakRSSMiB()
	if res.ConvergeSeconds <= 0 {
		return nil, errors.New("bench measured no time")
	}
	return res, nil
}

// followConverged follows the event stream and closes the returned channel
// once instances distinct instances reported that they converged (or when
// the stream fails: the caller then polls). It follows events rather than
// polling the service list, which at 100,000 instances would cost more than
// what it measures; it is what a UI showing a release live does too.
func followConverged(ctx context.Context, c *client.Client, instances int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := make(map[[2]string]struct{}, instances)
		errEnough := errors.New("every instance converged")
		_ = c.WatchTypes(ctx, "", "", 0, []string{"converged"}, func(e apiv1.Event) error {
			seen[[2]string{e.Service, e.ReleaseChannel}] = struct{}{}
			if len(seen) >= instances {
				return errEnough
			}
			return nil
		})
	}()
	return done
}

// waitConverged waits for the events to say every instance converged, then
// polls the list of services in brief (the web UI's) until it shows every
// service CONVERGED, with each of its channels converged.
func waitConverged(ctx context.Context, c *client.Client, services, channels int, events <-chan struct{}) error {
	select {
	case <-events:
	case <-ctx.Done():
	}
	for {
		list, err := c.ServiceSummaries(ctx)
		if err != nil {
			return cli.APIError(err)
		}
		converged := 0
		for _, st := range list.Services {
			if st.Status == "CONVERGED" && st.Channels == channels && st.Converged == channels {
				converged++
			}
		}
		if converged == services {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out with %d/%d services converged: %w", converged, services, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcUse is what the garbage collector did so far: the CPU seconds it took
// from the program (all its work but the idle-time marking) and its cycles.
type gcUse struct {
	seconds float64
	cycles  uint64
}

func readGC() gcUse {
	samples := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(samples)
	var u gcUse
	if samples[0].Value.Kind() == metrics.KindFloat64 && samples[1].Value.Kind() == metrics.KindFloat64 {
		u.seconds = samples[0].Value.Float64() - samples[1].Value.Float64()
	}
	if samples[2].Value.Kind() == metrics.KindUint64 {
		u.cycles = samples[2].Value.Uint64()
	}
	return u
}

// peakRSSMiB is the process's maximum resident set size (Linux reports KiB).
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
