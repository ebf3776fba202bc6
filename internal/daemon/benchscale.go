package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Several sizes, or several rounds: each run is a process of its own (a
// child drover bench), so that its CPU time, peak RSS and collector figures
// are its own. The sizes run in turn within each round, so that runs
// compared with each other were taken close together: on a shared machine
// whose speed moves from one minute to the next, a ratio of two runs taken
// far apart measures the machine as much as drover.

// benchRun is one child run's result, with its round.
type benchRun struct {
	Round int `json:"round"`
	benchResult
}

// benchSize sums up the runs of one number of services.
type benchSize struct {
	Services int `json:"services"`
	Runs     int `json:"runs"`
	// The medians of the runs (the mean of the middle two of an even
	// number), and the fastest and slowest convergence.
	ConvergeSeconds    float64 `json:"medianConvergeSeconds"`
	MinConvergeSeconds float64 `json:"minConvergeSeconds"`
	MaxConvergeSeconds float64 `json:"maxConvergeSeconds"`
	PushSeconds        float64 `json:"medianPushSeconds"`
	CPUSeconds         float64 `json:"medianCpuSeconds"`
	GCSeconds          float64 `json:"medianGcCpuSeconds"`
	// PeakRSSMiB is the highest peak of the runs.
	PeakRSSMiB float64 `json:"maxPeakRssMiB"`
}

// benchScaling compares one size with the smallest: how many times the
// services, how many times the time (the ratio of the median convergence
// times), and the same ratio within each round.
type benchScaling struct {
	Services      int       `json:"services"`
	Base          int       `json:"baseServices"`
	ServicesRatio float64   `json:"servicesRatio"`
	TimeRatio     float64   `json:"timeRatio"`
	RoundRatios   []float64 `json:"roundTimeRatios"`
}

type benchReport struct {
	Channels int            `json:"channels"`
	Runs     []benchRun     `json:"runs"`
	Sizes    []benchSize    `json:"sizes"`
	Scaling  []benchScaling `json:"scaling,omitempty"`
}

// benchChild runs one bench in a child process with args and returns its
// JSON output; tests may replace it.
var benchChild = func(ctx context.Context, args []string) ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the drover executable to run the benches: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...) //nolint:gosec // G204: this very drover executable, with the bench flags it builds
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", exe, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// runBenchSeries runs rounds of a bench of each of sizes, in turn, each in
// a child process, and reports every run as it ends to progress.
func runBenchSeries(ctx context.Context, sizes []int, rounds, channels, workers int, timeout time.Duration, progress io.Writer) (*benchReport, error) {
	rep := &benchReport{Channels: channels}
	for round := 1; round <= rounds; round++ {
		for _, n := range sizes {
			args := []string{"bench", "--services", strconv.Itoa(n), "--channels", strconv.Itoa(channels),
				"--workers", strconv.Itoa(workers), "--timeout", timeout.String(), "-o", "json"}
			out, err := benchChild(ctx, args)
			if err != nil {
				return nil, fmt.Errorf("round %d, %d services: %w", round, n, err)
			}
			run := benchRun{Round: round}
			if err := json.Unmarshal(out, &run.benchResult); err != nil {
				return nil, fmt.Errorf("round %d, %d services: read the result: %w", round, n, err)
			}
			rep.Runs = append(rep.Runs, run)
			fmt.Fprintf(progress, "round %d/%d: %d x %d converged in %.2fs (push %.2fs, CPU %.1fs, GC %.2fs, peak %.0f MiB)\n",
				round, rounds, n, channels, run.ConvergeSeconds, run.PushSeconds, run.CPUSeconds, run.GCSeconds, run.PeakRSSMiB)
		}
	}
	rep.summarize(sizes)
	return rep, nil
}

// summarize fills Sizes and Scaling from Runs.
func (rep *benchReport) summarize(sizes []int) {
	byRound := map[[2]int]float64{} // round, services -> converge seconds
	for _, n := range sizes {
		var conv, push, cpu, gc []float64
		s := benchSize{Services: n}
		for _, r := range rep.Runs {
			if r.Services != n {
				continue
			}
			s.Runs++
			conv, push = append(conv, r.ConvergeSeconds), append(push, r.PushSeconds)
			cpu, gc = append(cpu, r.CPUSeconds), append(gc, r.GCSeconds)
			s.PeakRSSMiB = max(s.PeakRSSMiB, r.PeakRSSMiB)
			byRound[[2]int{r.Round, n}] = r.ConvergeSeconds
		}
		if s.Runs == 0 {
			continue
		}
		s.ConvergeSeconds, s.MinConvergeSeconds, s.MaxConvergeSeconds = median(conv), slices.Min(conv), slices.Max(conv)
		s.PushSeconds, s.CPUSeconds, s.GCSeconds = median(push), median(cpu), median(gc)
		rep.Sizes = append(rep.Sizes, s)
	}
	if len(rep.Sizes) < 2 {
		return
	}
	base := slices.MinFunc(rep.Sizes, func(a, b benchSize) int { return a.Services - b.Services })
	for _, s := range rep.Sizes {
		if s.Services == base.Services || base.ConvergeSeconds <= 0 {
			continue
		}
		sc := benchScaling{Services: s.Services, Base: base.Services,
			ServicesRatio: float64(s.Services) / float64(base.Services), TimeRatio: s.ConvergeSeconds / base.ConvergeSeconds}
		for _, r := range rep.Runs {
			if r.Services != s.Services {
				continue
			}
			if b, ok := byRound[[2]int{r.Round, base.Services}]; ok && b > 0 {
				sc.RoundRatios = append(sc.RoundRatios, r.ConvergeSeconds/b)
			}
		}
		rep.Scaling = append(rep.Scaling, sc)
	}
}

// median is the middle of xs (the mean of the middle two of an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printBenchReport(w io.Writer, rep *benchReport) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SERVICES x %d\tRUNS\tCONVERGED IN (MEDIAN, MIN-MAX)\tPUSH\tCPU\tGC CPU\tPEAK RSS (MAX)\n", rep.Channels)
	for _, s := range rep.Sizes {
		fmt.Fprintf(tw, "%d\t%d\t%.2fs (%.2f-%.2f)\t%.2fs\t%.1fs\t%.2fs\t%.0f MiB\n", s.Services, s.Runs, s.ConvergeSeconds,
			s.MinConvergeSeconds, s.MaxConvergeSeconds, s.PushSeconds, s.CPUSeconds, s.GCSeconds, s.PeakRSSMiB)
	}
	_ = tw.Flush()
	for _, sc := range rep.Scaling {
		fmt.Fprintf(w, "%d against %d services: %.3gx the services, %.2fx the time (ratio of the medians", sc.Services, sc.Base, sc.ServicesRatio, sc.TimeRatio)
		if len(sc.RoundRatios) > 1 {
			fmt.Fprintf(w, "; within a round %.2f-%.2f", slices.Min(sc.RoundRatios), slices.Max(sc.RoundRatios))
		}
		fmt.Fprintln(w, ")")
	}
}
