// Package metrics is what a drover server tells Prometheus: the engine's
// passes, queue and tasks, the runtimes' calls, the API's requests, and
// every instance by status. The engine and the server know it only through
// the small interfaces they declare (engine.Observer, server.Metrics); the
// composition root wires them. docs/metrics.md lists every series.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-dev/drover/internal/store"
)

// Metrics holds a server's series, in a registry of its own.
type Metrics struct {
	registry        *prometheus.Registry
	reconcile       *prometheus.HistogramVec
	tasks           *prometheus.CounterVec
	taskDuration    *prometheus.HistogramVec
	runtimeCalls    *prometheus.HistogramVec
	runtimeErrors   *prometheus.CounterVec
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	auditErrors     prometheus.Counter
}

// durations are the histogram buckets of calls and passes, in seconds:
// from a millisecond (a pass on an embedded store) to ten minutes (an
// apply that waits for a Terraform run).
var durations = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600}

// New returns the series of one server, with the Go runtime's and the
// process's.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "drover_reconcile_duration_seconds", Help: "Time of one engine pass over a service (read, observe, plan, commit), by result (success, requeue, requeue_after, error, terminal).", Buckets: durations,
		}, []string{"result"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_tasks_total", Help: "Tasks the engine carried out (applies, checks), by kind and outcome (succeeded, failed, interrupted, lost).",
		}, []string{"kind", "outcome"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "drover_task_duration_seconds", Help: "Time to carry out a task, by kind.", Buckets: durations,
		}, []string{"kind"}),
		runtimeCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "drover_runtime_call_duration_seconds", Help: "Time of calls to runtimes, by runtime, operation (fetch, apply) and result (ok, error).", Buckets: durations,
		}, []string{"runtime", "op", "result"}),
		runtimeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_runtime_call_errors_total", Help: "Calls to runtimes that failed, by runtime and operation.",
		}, []string{"runtime", "op"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_api_requests_total", Help: "API requests, by route (as the route table names it) and HTTP status code.",
		}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "drover_api_request_duration_seconds", Help: "Time to answer API requests (event streams excluded), by route.", Buckets: durations,
		}, []string{"route"}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_audit_write_errors_total", Help: "Audit records the store did not take (the change they record was made).",
		}),
	}
	m.registry.MustRegister(m.auditErrors, m.reconcile, m.tasks, m.taskDuration, m.runtimeCalls, m.runtimeErrors, m.requests, m.requestDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the series in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the registry the series are in (for tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Reconciled implements engine.Observer: result is how the pass ended
// (success, requeue, requeue_after, error, terminal).
func (m *Metrics) Reconciled(d time.Duration, result string) {
	m.reconcile.WithLabelValues(result).Observe(d.Seconds())
}

// TaskDone implements engine.Observer.
func (m *Metrics) TaskDone(kind, outcome string, d time.Duration) {
	m.tasks.WithLabelValues(kind, outcome).Inc()
	m.taskDuration.WithLabelValues(kind).Observe(d.Seconds())
}

// RuntimeCall implements engine.Observer.
func (m *Metrics) RuntimeCall(runtime, op string, d time.Duration, err error) {
	m.runtimeCalls.WithLabelValues(runtime, op, result(err)).Observe(d.Seconds())
	if err != nil {
		m.runtimeErrors.WithLabelValues(runtime, op).Inc()
	}
}

// Request implements server.Metrics: an API request to route answered
// with code in d (d < 0: a stream, whose duration is not a latency).
func (m *Metrics) Request(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	if d >= 0 {
		m.requestDuration.WithLabelValues(route).Observe(d.Seconds())
	}
}

// AuditFailed implements server.Metrics.
func (m *Metrics) AuditFailed() { m.auditErrors.Inc() }

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// QueueDepth adds drover_engine_queue_depth, read from depth at each
// scrape.
func (m *Metrics) QueueDepth(depth func() int) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "drover_engine_queue_depth", Help: "Services waiting for an engine pass now (not those due later).",
	}, func() float64 { return float64(depth()) }))
}

// Instances adds drover_instances (every instance by status and reason,
// which is where gates show: WAITING_MANUAL_APPROVAL, WAITING_PRECONDITIONS
// and why) and drover_instances_waiting_seconds (the oldest wait by status
// and reason), read from list at most every refresh (a scrape between
// reads gets the last counts).
func (m *Metrics) Instances(list func(ctx context.Context) ([]store.Instance, error), refresh time.Duration) {
	m.registry.MustRegister(&instanceCollector{list: list, refresh: refresh, now: time.Now})
}

var (
	instancesDesc = prometheus.NewDesc("drover_instances", "Instances (a service in a release channel) by application, status and reason.",
		[]string{"application", "status", "reason"}, nil)
	waitingDesc = prometheus.NewDesc("drover_instances_waiting_seconds", "How long the instance that waits longest in a status has been in it (since its last change), by application, status and reason.",
		[]string{"application", "status", "reason"}, nil)
	instanceErrDesc = prometheus.NewDesc("drover_instances_read_errors_total", "Failed reads of the instances for drover_instances.", nil, nil)
)

type instanceKey struct{ app, status, reason string }

// instanceCollector counts instances at scrape time, from a cached read.
type instanceCollector struct {
	list    func(ctx context.Context) ([]store.Instance, error)
	refresh time.Duration
	now     func() time.Time

	mu      sync.Mutex
	readAt  time.Time
	counts  map[instanceKey]int
	oldest  map[instanceKey]time.Time
	readErr int
}

func (c *instanceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- instancesDesc
	ch <- waitingDesc
	ch <- instanceErrDesc
}

func (c *instanceCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.counts == nil || now.Sub(c.readAt) >= c.refresh {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		list, err := c.list(ctx)
		cancel()
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			c.readErr++
		case err == nil:
			c.counts, c.oldest, c.readAt = map[instanceKey]int{}, map[instanceKey]time.Time{}, now
			for _, inst := range list {
				k := instanceKey{inst.Application, string(inst.Status), string(inst.Reason)}
				c.counts[k]++
				if inst.UpdatedAt.IsZero() {
					continue
				}
				if t, ok := c.oldest[k]; !ok || inst.UpdatedAt.Before(t) {
					c.oldest[k] = inst.UpdatedAt
				}
			}
		}
	}
	for k, n := range c.counts {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(n), k.app, k.status, k.reason)
		if since := c.oldest[k]; !since.IsZero() && waits(k.status) {
			ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, now.Sub(since).Seconds(), k.app, k.status, k.reason)
		}
	}
	ch <- prometheus.MustNewConstMetric(instanceErrDesc, prometheus.CounterValue, float64(c.readErr))
}

// waits reports whether status is one an instance waits in (for a gate,
// an approval, a rollout), whose age is worth an alert; terminal statuses
// (converged, failed, rolled back, replaced) are not waits.
func waits(status string) bool {
	switch status {
	case "WAITING_MANUAL_APPROVAL", "WAITING_PRECONDITIONS", "BLOCKED", "CONVERGING", "ROLLING_BACK", "PAUSED":
		return true
	}
	return false
}
