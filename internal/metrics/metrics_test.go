package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// TestSeries: what the engine and the API report shows in the scrape, and
// instances are counted by application, status and reason from a cached
// read.
func TestSeries(t *testing.T) {
	m := New()
	m.Reconciled(3*time.Millisecond, "success")
	m.Reconciled(2*time.Millisecond, "requeue_after")
	m.Reconciled(time.Second, "error")
	m.TaskDone("apply", "succeeded", 20*time.Millisecond)
	m.TaskDone("apply", "failed", 20*time.Millisecond)
	m.TaskDone("apply", "failed", 20*time.Millisecond)
	m.RuntimeCall("prod", "fetch", time.Millisecond, nil)
	m.RuntimeCall("prod", "apply", time.Millisecond, errors.New("refused"))
	m.Request("POST /v1/apps/{app}/services/{svc}:push", 200, 5*time.Millisecond)
	m.Request("GET /v1/watch", 200, -1)
	m.AuditFailed()
	depth := 7
	m.QueueDepth(func() int { return depth })
	reads := 0
	m.Instances(func(context.Context) ([]store.Instance, error) {
		reads++
		old := time.Now().Add(-time.Hour)
		return []store.Instance{
			{Application: "shop", Status: ds.StatusConverged, UpdatedAt: old},
			{Application: "shop", Status: ds.StatusConverged, UpdatedAt: old},
			{Application: "shop", Status: ds.StatusWaitingManualApproval, Reason: ds.ReasonManualApprovalPending, UpdatedAt: old},
		}, nil
	}, time.Hour)

	if got := testutil.ToFloat64(m.tasks.WithLabelValues("apply", "failed")); got != 2 {
		t.Errorf("failed applies %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.runtimeErrors.WithLabelValues("prod", "apply")); got != 1 {
		t.Errorf("runtime errors %v, want 1", got)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`drover_reconcile_duration_seconds_count{result="error"} 1`,
		`drover_reconcile_duration_seconds_count{result="requeue_after"} 1`,
		`drover_reconcile_duration_seconds_count{result="success"} 1`,
		`drover_tasks_total{kind="apply",outcome="succeeded"} 1`,
		`drover_runtime_call_duration_seconds_count{op="fetch",result="ok",runtime="prod"} 1`,
		`drover_api_requests_total{code="200",route="POST /v1/apps/{app}/services/{svc}:push"} 1`,
		`drover_api_requests_total{code="200",route="GET /v1/watch"} 1`,
		`drover_engine_queue_depth 7`,
		`drover_audit_write_errors_total 1`,
		`drover_instances{application="shop",reason="",status="CONVERGED"} 2`,
		`drover_instances{application="shop",reason="MANUAL_APPROVAL_PENDING",status="WAITING_MANUAL_APPROVAL"} 1`,
		`go_goroutines`, `process_resident_memory_bytes`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	waiting := regexp.MustCompile(`drover_instances_waiting_seconds\{application="shop",reason="MANUAL_APPROVAL_PENDING",status="WAITING_MANUAL_APPROVAL"\} (\S+)`).FindStringSubmatch(string(body))
	if waiting == nil {
		t.Error("the scrape lacks the approval's wait")
	} else if v, err := strconv.ParseFloat(waiting[1], 64); err != nil || v < 3590 || v > 3700 {
		t.Errorf("the approval waited %s s, want about an hour", waiting[1])
	}
	if strings.Contains(string(body), `drover_api_request_duration_seconds_count{route="GET /v1/watch"}`) {
		t.Error("an event stream's duration was counted as a latency")
	}
	if strings.Contains(string(body), `drover_instances_waiting_seconds{application="shop",reason="",status="CONVERGED"}`) {
		t.Error("converged instances were reported as waiting")
	}
	m.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	if reads != 1 {
		t.Errorf("the instances were read %d times for two scrapes within the refresh, want 1", reads)
	}
}
