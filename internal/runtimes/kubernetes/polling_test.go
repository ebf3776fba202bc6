package kubernetes

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/testing/kubetest"
)

// requestCounter counts a runtime's requests by verb: WATCH, GET (single
// objects and lists alike) and the rest by HTTP method.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		verb := req.Method
		if verb == http.MethodGet && req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		c.counts[verb]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// apiserverRequests reads apiserver_request_total from the apiserver's
// metrics, summed by "VERB resource".
func apiserverRequests(t *testing.T, c *kubetest.Cluster) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(c.Get(t, "/metrics")))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		out[labels["verb"]+" "+labels["resource"]] += v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoPolling: with five instances converged and idle, ten seconds of
// fetching (far more often than the engine does) make no GET or LIST
// request: Fetch reads the watch caches. Counted twice: by the runtime's own
// transport, and by the apiserver's request metrics for the resources drover
// touches. Not parallel, so that no other test's requests are counted.
func TestNoPolling(t *testing.T) {
	c := kubetest.Shared(t)
	var counter requestCounter
	r := newRuntime(t, Settings{WrapTransport: counter.wrap})
	var targets []runtimes.Target
	for i := range 5 {
		name := fmt.Sprintf("idle-%d", i)
		targets = append(targets, target(t, key(name), "v1", deploymentObject(name, "v1", 1), configMapObject(name, "v1")))
	}
	for _, tg := range targets {
		mustApply(t, r, tg)
	}
	for _, tg := range targets {
		waitConverged(t, r, tg)
	}
	watch(t, r)
	time.Sleep(time.Second) // let the last status updates settle

	clientBefore, serverBefore := counter.snapshot(), apiserverRequests(t, c)
	fetches := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, tg := range targets {
			if st := mustFetch(t, r, tg); !st.Converged {
				t.Errorf("%s while idle: %+v", tg.InstanceKey, st)
			}
			fetches++
		}
	}
	clientAfter, serverAfter := counter.snapshot(), apiserverRequests(t, c)

	t.Logf("%d fetches; runtime requests before %v, after %v", fetches, clientBefore, clientAfter)
	for verb, n := range clientAfter {
		if verb != "WATCH" && n != clientBefore[verb] {
			t.Errorf("runtime made %d %s requests while idle", n-clientBefore[verb], verb)
		}
	}
	for _, res := range []string{"deployments", "configmaps", "namespaces"} {
		for _, verb := range []string{"GET", "LIST", "WATCH"} {
			k := verb + " " + res
			d := serverAfter[k] - serverBefore[k]
			t.Logf("apiserver %s: %.0f -> %.0f", k, serverBefore[k], serverAfter[k])
			if verb != "WATCH" && d != 0 {
				t.Errorf("apiserver served %.0f %s requests while drover was idle", d, k)
			}
		}
	}
}
