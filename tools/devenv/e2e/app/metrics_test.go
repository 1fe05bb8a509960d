package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// /metrics shows requests by route and code with latency, Kubernetes calls, status
// events, informer sync, leadership and registration state.
func TestMetrics(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	events := newSink(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=50"))
	p.waitSynced(t)
	create(t, p, "m1", spec("m1", "nginx"))
	do(t, http.MethodGet, p.URL+containers+"/m1", nil)
	do(t, http.MethodGet, p.URL+containers+"/nope", nil)
	events.waitStatus("m1", "RUNNING", "", 30*time.Second)

	var body string
	testenv.Eventually(t, 10*time.Second, "metrics", func() error {
		r := do(t, http.MethodGet, p.URL+"/metrics", nil)
		body = string(r.Body)
		for _, want := range []string{
			`sp_http_requests_total{code="201",method="POST",route="containers"} 1`,
			`sp_http_requests_total{code="200",method="GET",route="container"} 1`,
			`sp_http_requests_total{code="404",method="GET",route="container"} 1`,
			`sp_http_request_duration_seconds_bucket{method="POST",route="containers",le=`,
			`sp_kubernetes_requests_total{client="service",code="201",method="POST",resource="configmaps"}`,
			`sp_status_events_published_total{status="RUNNING"}`,
			"sp_status_events_failed_total 0",
			"sp_status_events_pending 0",
			"sp_informers_synced 1",
			`sp_cache_stale_seconds{cache="pods"} 0`,
			"sp_leader 1",
			`sp_registration_state{state="pending"} 1`,
			`sp_registration_attempts_total{code="error"}`,
			"go_goroutines",
		} {
			if !strings.Contains(body, want) {
				return &missing{want}
			}
		}
		return nil
	})
}

type missing struct{ s string }

func (m *missing) Error() string { return "no " + m.s }
