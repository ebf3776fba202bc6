package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// drover bench with two sizes and two rounds runs each size in turn in
// each round, each run a process of its own, and reports each size's
// medians and the larger against the smaller.
func TestBenchSeriesComparesSizes(t *testing.T) {
	t.Parallel()
	r := runDrover(t, "bench", "--services", "3,6", "--channels", "2", "--rounds", "2", "--timeout", "2m", "-o", "json")
	if r.code != 0 {
		t.Fatal(r)
	}
	var rep struct {
		Channels int
		Runs     []struct{ Round, Services, Instances int }
		Sizes    []struct {
			Services, Runs int
			Median         float64 `json:"medianConvergeSeconds"`
			PeakRSS        float64 `json:"maxPeakRssMiB"`
			MedianCPU      float64 `json:"medianCpuSeconds"`
			ConvergeMin    float64 `json:"minConvergeSeconds"`
			ConvergeMax    float64 `json:"maxConvergeSeconds"`
		}
		Scaling []struct {
			Services, BaseServices int
			ServicesRatio          float64
			TimeRatio              float64
			RoundTimeRatios        []float64
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	order := []struct{ Round, Services, Instances int }{{1, 3, 6}, {1, 6, 12}, {2, 3, 6}, {2, 6, 12}}
	if len(rep.Runs) != len(order) {
		t.Fatalf("runs %+v, want %+v", rep.Runs, order)
	}
	for i, want := range order {
		if rep.Runs[i] != want {
			t.Errorf("run %d: %+v, want %+v", i, rep.Runs[i], want)
		}
	}
	if len(rep.Sizes) != 2 || rep.Sizes[0].Services != 3 || rep.Sizes[1].Services != 6 {
		t.Fatalf("sizes %+v", rep.Sizes)
	}
	for _, s := range rep.Sizes {
		if s.Runs != 2 || s.Median <= 0 || s.Median < s.ConvergeMin || s.Median > s.ConvergeMax || s.PeakRSS <= 0 || s.MedianCPU <= 0 {
			t.Errorf("size %+v", s)
		}
	}
	if len(rep.Scaling) != 1 || rep.Scaling[0].Services != 6 || rep.Scaling[0].BaseServices != 3 || rep.Scaling[0].ServicesRatio != 2 ||
		rep.Scaling[0].TimeRatio <= 0 || len(rep.Scaling[0].RoundTimeRatios) != 2 {
		t.Errorf("scaling %+v", rep.Scaling)
	}
	// The runs' progress goes to stderr, so that stdout stays JSON.
	if strings.Count(r.stderr, "converged in") != 4 {
		t.Errorf("progress on stderr:\n%s", r.stderr)
	}
}
