package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// releaseChainTree is an application of n services in one release channel, each
// waiting for the one before it (svc-001 for svc-000, ...), on a fake
// runtime whose rollouts take rollout.
func releaseChainTree(t *testing.T, app string, n int, rollout string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), app)
	files := map[string]string{
		"runtimes/staging.pvn.yaml": fakeRuntime("staging", rollout, ""),
		"app.pvn.yaml":              "application:\n  name: " + app + "\n  releaseChannels:\n    - name: staging\n      runtimes:\n        - runtime: staging\n      constants:\n        - name: replicas\n          string: {value: \"1\"}\n",
	}
	for i := range n {
		name := fmt.Sprintf("svc-%03d", i)
		for k, v := range serviceFiles(app, name) {
			files[k] = v
		}
		if i > 0 {
			files["services/"+name+"/"+name+".pvn.yaml"] += fmt.Sprintf("  dependsOn:\n    - service: svc-%03d\n", i-1)
		}
	}
	writeTree(t, dir, files)
	return dir
}

// TestReleaseHandoff measures, for a release of a chain of 3 and of 100
// services, the time from each service converging to the next one's
// rollout starting (its started event), and checks none started before
// the one it waits for converged. The numbers are logged, not asserted.
func TestReleaseHandoff(t *testing.T) {
	requireE2E(t)
	for _, n := range []int{3, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := releaseChainTree(t, "chain", n, "200ms")
			s := newServer(t)
			s.ok("alice", "apply", dir+"/...")
			args := make([]string, 0, 2*n)
			for i := range n {
				args = append(args, "--param", fmt.Sprintf("svc-%03d.image=1.0", i))
			}
			rel := s.release("dev", "chain", args...)
			last := rel.Services[len(rel.Services)-1]
			s.waitStatus("chain", last.Service, time.Duration(n)*2*time.Second+30*time.Second, "the last service converged", channelIs("staging", "CONVERGED", last.Version))
			ids := map[string]string{}
			for _, m := range rel.Services {
				ids[m.Service] = m.DesiredStateID
			}
			var gaps []time.Duration
			for i := 1; i < n; i++ {
				dep, svc := fmt.Sprintf("svc-%03d", i-1), fmt.Sprintf("svc-%03d", i)
				converged := s.eventAt("chain", dep, "staging", "converged", ids[dep])
				started := s.eventAt("chain", svc, "staging", "started", ids[svc])
				if started.Before(converged) {
					t.Fatalf("%s started at %v, before %s converged at %v", svc, started, dep, converged)
				}
				gaps = append(gaps, started.Sub(converged))
			}
			slices.Sort(gaps)
			t.Logf("%d services: dependency converged -> dependant started: median %v, p90 %v, max %v (%d handoffs)",
				n, gaps[len(gaps)/2], gaps[len(gaps)*9/10], gaps[len(gaps)-1], len(gaps))
			var st apiv1.Release
			if err := s.getJSON("/v1/apps/chain/releases/"+rel.ID, &st); err != nil || st.Status != "SUCCEEDED" {
				t.Errorf("release %s: %v %s", rel.ID, err, st.Status)
			}
		})
	}
}
