package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/internal/store"
)

// notifySeries are the notifications' series (Notifications adds them).
type notifySeries struct {
	delivered *prometheus.CounterVec
	failed    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

// Notifications adds the series of notification deliveries:
// drover_notifications_delivered_total and _failed_total by target and
// type, drover_notification_delivery_seconds (from the event's commit to
// the target taking it), and drover_notification_deliveries (the outbox by
// target and state, counted by count at scrape time). It returns the
// observer the dispatcher reports to.
func (m *Metrics) Notifications(count func(ctx context.Context) ([]store.DeliveryCount, error)) *NotifyObserver {
	n := &notifySeries{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_notifications_delivered_total", Help: "Notifications a target took, by target and notification type.",
		}, []string{"target", "type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_notifications_failed_total", Help: "Attempts to deliver a notification that failed, by target, notification type and whether the delivery gave up (dead).",
		}, []string{"target", "type", "dead"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "drover_notification_delivery_seconds", Help: "Time from an event's commit to its notification's delivery, by target (retries included).", Buckets: durations,
		}, []string{"target"}),
	}
	m.registry.MustRegister(n.delivered, n.failed, n.latency, &deliveryCollector{count: count})
	return &NotifyObserver{n}
}

// NotifyObserver counts deliveries (notify.Observer).
type NotifyObserver struct{ s *notifySeries }

// Delivered implements notify.Observer.
func (o *NotifyObserver) Delivered(target, typ string, latency time.Duration) {
	o.s.delivered.WithLabelValues(target, typ).Inc()
	o.s.latency.WithLabelValues(target).Observe(max(latency, 0).Seconds())
}

// Failed implements notify.Observer.
func (o *NotifyObserver) Failed(target, typ string, dead bool) {
	o.s.failed.WithLabelValues(target, typ, strconv.FormatBool(dead)).Inc()
}

var deliveriesDesc = prometheus.NewDesc("drover_notification_deliveries", "Deliveries in the outbox, by target and state (pending, delivered, dead).", []string{"target", "state"}, nil)

type deliveryCollector struct {
	count func(ctx context.Context) ([]store.DeliveryCount, error)
}

func (c *deliveryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- deliveriesDesc }

func (c *deliveryCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.count(ctx)
	if err != nil {
		return
	}
	for _, d := range list {
		ch <- prometheus.MustNewConstMetric(deliveriesDesc, prometheus.GaugeValue, float64(d.Count), d.Target, string(d.State))
	}
}
