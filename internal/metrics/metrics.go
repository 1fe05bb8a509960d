package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the collectors of one provider process.
type Metrics struct {
	Registry *prometheus.Registry

	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	kubeRequests  *prometheus.CounterVec
	eventsSent    *prometheus.CounterVec
	eventsFailed  prometheus.Counter
	registrations *prometheus.CounterVec
}

// Gauges are read when scraped.
type Gauges struct {
	EventsPending   func() float64
	InformersSynced func() bool
	// NATSConnected: this replica's NATS connection is up.
	NATSConnected func() bool
	Leader        func() bool
	// RegistrationState is pending, registered or rejected.
	RegistrationState func() string
	// RegistrationError is why the last registration attempt failed ("" when it did
	// not), one of RegistrationErrors (a fixed set: the label's values). Health shows a
	// fixed text for it; the detail is in the log.
	RegistrationError  func() string
	RegistrationErrors []string
	// CacheStale is how long a cache may have been out of date (0 when current), for
	// each of Caches (a fixed set: the label's values).
	CacheStale func(cache string) float64
	Caches     []string
}

// New registers every collector, plus the Go and process collectors.
func New(g Gauges) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sp_http_requests_total", Help: "HTTP requests answered, by route, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sp_http_request_duration_seconds", Help: "HTTP request latency, by route and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method"}),
		kubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sp_kubernetes_requests_total",
			Help: "Requests to the Kubernetes API, by client (service, confirm, election), resource, method and status code (error when no answer came).",
		}, []string{"client", "resource", "method", "code"}),
		eventsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sp_status_events_published_total", Help: "Status events delivered, by status.",
		}, []string{"status"}),
		eventsFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sp_status_events_failed_total", Help: "Status event deliveries that failed (each is retried).",
		}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sp_registration_attempts_total", Help: "Registration attempts, by the registry answer (error when none).",
		}, []string{"code"}),
	}
	r.MustRegister(m.httpRequests, m.httpDuration, m.kubeRequests, m.eventsSent, m.eventsFailed, m.registrations,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	boolGauge := func(name, help string, f func() bool) {
		if f == nil {
			return
		}
		r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if f() {
				return 1
			}
			return 0
		}))
	}
	boolGauge("sp_informers_synced", "1 when the Deployment, Pod, Service and container record caches are synced.", g.InformersSynced)
	boolGauge("sp_leader", "1 when this replica is the elected status publisher.", g.Leader)
	boolGauge("sp_nats_connected", "1 when this replica's NATS connection is up (status events can be published).", g.NATSConnected)
	if g.EventsPending != nil {
		r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sp_status_events_pending",
			Help: "Containers whose current status is owed to DCM: changed or to be republished, and not delivered yet " +
				"(held by the debounce, queued, being sent, or waiting to retry after a failed delivery). 0 on a replica that is not the publisher.",
		}, g.EventsPending))
	}
	if g.RegistrationState != nil {
		for _, state := range []string{"pending", "registered", "rejected"} {
			r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "sp_registration_state", Help: "1 for the current registration state with the DCM registry.",
				ConstLabels: prometheus.Labels{"state": state},
			}, func() float64 {
				if g.RegistrationState() == state {
					return 1
				}
				return 0
			}))
		}
	}
	if g.RegistrationError != nil {
		for _, reason := range g.RegistrationErrors {
			r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "sp_registration_error",
				Help:        "1 for the reason the last registration attempt failed (0 for every reason once one succeeds); the registry's answer is in the log.",
				ConstLabels: prometheus.Labels{"reason": reason},
			}, func() float64 {
				if g.RegistrationError() == reason {
					return 1
				}
				return 0
			}))
		}
	}
	if g.CacheStale != nil {
		for _, cache := range g.Caches {
			r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "sp_cache_stale_seconds",
				Help: "Seconds this replica's cache may have been out of date: since its watch of the Kubernetes API broke (or its last list), " +
					"or since a connected watch last sent anything; 0 while it is current. Past SP_K8S_MAX_STALENESS (broken watch) " +
					"or the silence bound (silent watch), reads that need it answer 503 and /readyz fails.",
				ConstLabels: prometheus.Labels{"cache": cache},
			}, func() float64 { return g.CacheStale(cache) }))
		}
	}
	return m
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// EventPublished and EventFailed are the status controller's hooks.
func (m *Metrics) EventPublished(status string) { m.eventsSent.WithLabelValues(status).Inc() }
func (m *Metrics) EventFailed()                 { m.eventsFailed.Inc() }

// RegistrationAttempt counts one registration call (code 0: no answer).
func (m *Metrics) RegistrationAttempt(code int) {
	m.registrations.WithLabelValues(codeLabel(code)).Inc()
}

// Route names an API path with bounded cardinality (ids are not labels).
func Route(path string) string {
	switch p := strings.TrimSuffix(path, "/"); {
	case p == "/metrics":
		return "metrics"
	case p == "/health" || p == "/api/v1alpha1/containers/health":
		return "health"
	case p == "/api/v1alpha1/containers":
		return "containers"
	case strings.HasPrefix(p, "/api/v1alpha1/containers/") && !strings.Contains(p[len("/api/v1alpha1/containers/"):], "/"):
		return "container"
	}
	return "other"
}

// Method names an HTTP method with bounded cardinality: a client may send any token as
// the method, and a label value per distinct token would grow the registry (and
// /metrics) without bound.
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// kubeMethod is the method label of a request to the Kubernetes API: its HTTP method,
// or WATCH for a watch, as the apiserver's own metrics name it. A watch is an
// informer's: it starts again every 5 to 10 minutes (client-go's watch timeout)
// whatever the load, so counted as a GET it would pass for a read.
func kubeMethod(r *http.Request) string {
	if IsWatch(r) {
		return "WATCH"
	}
	return Method(r.Method)
}

// IsWatch reports whether a request to the Kubernetes API is a watch: a GET with
// watch=true (or 1).
func IsWatch(r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.Contains(r.URL.RawQuery, "watch=") {
		return false
	}
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// Middleware records every HTTP request.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route, method := Route(r.URL.Path), Method(r.Method)
		m.httpRequests.WithLabelValues(route, method, strconv.Itoa(rec.code)).Inc()
		m.httpDuration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) { r.code = code; r.ResponseWriter.WriteHeader(code) }

// The client label's values: the service's own client (the store, the status
// controller, the permission check, the health probe), the one confirming cache misses
// (a limiter of its own), and the leader election's (its ConfigMap lock).
const (
	ClientService  = "service"
	ClientConfirm  = "confirm"
	ClientElection = "election"
)

// kubeResources are the resource label's values besides "other": what the service
// reads and writes. The label tells an operator what the requests are about and stays
// bounded whatever the path.
var kubeResources = []string{"configmaps", "deployments", "pods", "services", "resourcequotas",
	"selfsubjectaccessreviews", "selfsubjectrulesreviews", "namespaces"}

// Resource is the resource of a Kubernetes API path (/api/v1/namespaces/ns/pods/name,
// /apis/group/version/resource, …), "other" when it is none of kubeResources, "none"
// for a path outside the resource APIs (/readyz, /version).
func Resource(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(seg) >= 3 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 4 && seg[0] == "apis":
		seg = seg[3:]
	default:
		return "none"
	}
	res := seg[0]
	if res == "namespaces" && len(seg) >= 3 {
		res = seg[2]
	}
	if slices.Contains(kubeResources, res) {
		return res
	}
	return "other"
}

// Transport counts the requests of client (one of the Client constants) to the
// Kubernetes API: wrap its rest.Config with it.
func (m *Metrics) Transport(client string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{rt: rt, m: m, client: client} }
}

type countingTransport struct {
	rt     http.RoundTripper
	m      *Metrics
	client string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	c.m.kubeRequests.WithLabelValues(c.client, Resource(r.URL.Path), kubeMethod(r), codeLabel(code)).Inc()
	return resp, err
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (c *countingTransport) WrappedRoundTripper() http.RoundTripper { return c.rt }

func codeLabel(code int) string {
	if code == 0 {
		return "error"
	}
	return strconv.Itoa(code)
}
