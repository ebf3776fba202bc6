package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The series runs each size in turn within each round, each in a child
// with the flags given, and sums up what the children reported.
func TestBenchSeries(t *testing.T) {
	// Converge times by round: 10 services take 9, 12 and 10 times as long
	// as 1 in rounds 1-3; push, CPU and peak follow the services.
	conv := map[[2]int]float64{{1, 1}: 2, {1, 10}: 18, {2, 1}: 1, {2, 10}: 12, {3, 1}: 3, {3, 10}: 30}
	var calls []string
	round := map[int]int{}
	old := benchChild
	t.Cleanup(func() { benchChild = old })
	benchChild = func(_ context.Context, args []string) ([]byte, error) {
		calls = append(calls, strings.Join(args, " "))
		n, _ := strconv.Atoi(args[2])
		round[n]++
		return json.Marshal(benchResult{Services: n, Channels: 4, Instances: 4 * n, ConvergeSeconds: conv[[2]int{round[n], n}],
			PushSeconds: float64(n) / 10, CPUSeconds: float64(n) * float64(round[n]), GCSeconds: 0.1, PeakRSSMiB: 100 + float64(n*round[n])})
	}
	var progress strings.Builder
	rep, err := runBenchSeries(context.Background(), []int{1, 10}, 3, 4, 8, time.Minute, &progress)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{}
	for range 3 {
		for _, n := range []string{"1", "10"} {
			want = append(want, "bench --services "+n+" --channels 4 --workers 8 --timeout 1m0s -o json")
		}
	}
	if !slices.Equal(calls, want) {
		t.Errorf("children run\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if got := strings.Count(progress.String(), "\n"); got != 6 || !strings.Contains(progress.String(), "round 3/3: 10 x 4 converged in 30.00s") {
		t.Errorf("progress:\n%s", progress.String())
	}
	if len(rep.Runs) != 6 || rep.Runs[5].Round != 3 || rep.Runs[5].Services != 10 {
		t.Fatalf("runs %+v", rep.Runs)
	}
	if len(rep.Sizes) != 2 {
		t.Fatalf("sizes %+v", rep.Sizes)
	}
	small, big := rep.Sizes[0], rep.Sizes[1]
	if small.Services != 1 || small.Runs != 3 || small.ConvergeSeconds != 2 || small.MinConvergeSeconds != 1 || small.MaxConvergeSeconds != 3 || small.CPUSeconds != 2 {
		t.Errorf("1 service: %+v", small)
	}
	if big.ConvergeSeconds != 18 || big.PeakRSSMiB != 130 || big.PushSeconds != 1 {
		t.Errorf("10 services: %+v", big)
	}
	if len(rep.Scaling) != 1 {
		t.Fatalf("scaling %+v", rep.Scaling)
	}
	sc := rep.Scaling[0]
	if sc.Services != 10 || sc.Base != 1 || sc.ServicesRatio != 10 || sc.TimeRatio != 9 || !slices.Equal(sc.RoundRatios, []float64{9, 12, 10}) {
		t.Errorf("scaling %+v", sc)
	}
	var out strings.Builder
	printBenchReport(&out, rep)
	if !strings.Contains(out.String(), "10 against 1 services: 10x the services, 9.00x the time (ratio of the medians; within a round 9.00-12.00)") {
		t.Errorf("report:\n%s", out.String())
	}

	// A child that fails stops the series with what it said.
	benchChild = func(context.Context, []string) ([]byte, error) {
		return nil, errors.New("timed out with 3/10 services converged")
	}
	if _, err := runBenchSeries(context.Background(), []int{1}, 2, 4, 8, time.Minute, &progress); err == nil || !strings.Contains(err.Error(), "round 1, 1 services: timed out") {
		t.Errorf("a failed child: %v", err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
