package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLabelsAreBounded(t *testing.T) {
	for _, tc := range []struct{ in, route string }{
		{"/api/v1alpha1/containers", "containers"}, {"/api/v1alpha1/containers/", "containers"},
		{"/api/v1alpha1/containers/web-1", "container"}, {"/api/v1alpha1/containers/health", "health"},
		{"/health", "health"}, {"/metrics", "metrics"},
		{"/api/v1alpha1/containers/a/b", "other"}, {"/" + strings.Repeat("x", 4096), "other"},
	} {
		if got := Route(tc.in); got != tc.route {
			t.Errorf("Route(%.40q) = %q, want %q", tc.in, got, tc.route)
		}
	}
	for in, want := range map[string]string{
		"/api/v1/namespaces/dcm/configmaps/dcm-container-a":                   "configmaps",
		"/api/v1/namespaces/dcm/pods":                                         "pods",
		"/apis/apps/v1/namespaces/dcm/deployments/a-x7k2p":                    "deployments",
		"/apis/coordination.k8s.io/v1/namespaces/dcm/leases/k8s-container-sp": "other",
		"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":              "selfsubjectaccessreviews",
		"/api/v1/namespaces/dcm":                                              "namespaces",
		"/api/v1/namespaces":                                                  "namespaces",
		"/api/v1/namespaces/dcm/secrets/x":                                    "other",
		"/apis/apps/v1/namespaces/dcm/" + strings.Repeat("x", 4096):           "other",
		"/readyz": "none",
		"/api":    "none",
		"":        "none",
	} {
		if got := Resource(in); got != want {
			t.Errorf("Resource(%.60q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"GET": "GET", "DELETE": "DELETE", "get": "other", "BREW": "other", strings.Repeat("M", 4096): "other"} {
		if got := Method(in); got != want {
			t.Errorf("Method(%.20q) = %q, want %q", in, got, want)
		}
	}
}

func TestKubeMethod(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{"GET", "https://k/api/v1/namespaces/dcm/pods?labelSelector=x&watch=true&timeoutSeconds=300", "WATCH"},
		{"GET", "https://k/api/v1/namespaces/dcm/pods?watch=1", "WATCH"},
		{"GET", "https://k/api/v1/namespaces/dcm/pods?watch=false", "GET"},
		{"GET", "https://k/api/v1/namespaces/dcm/pods?limit=500", "GET"},
		{"GET", "https://k/api/v1/namespaces/dcm/configmaps/watch=true", "GET"},
		{"POST", "https://k/api/v1/namespaces/dcm/pods?watch=true", "POST"},
		{"BREW", "https://k/readyz", "other"},
	} {
		r := httptest.NewRequest(c.method, c.url, nil)
		if got := kubeMethod(r); got != c.want {
			t.Errorf("kubeMethod(%s %s) = %q, want %q", c.method, c.url, got, c.want)
		}
	}
}

// The reproduction from the hardening issue: thousands of distinct methods and paths
// must not add a series each.
func TestHostileRequestsAddNoSeries(t *testing.T) {
	m := New(Gauges{EventsPending: func() float64 { return 0 }, InformersSynced: func() bool { return true },
		Leader: func() bool { return true }, RegistrationState: func() string { return "registered" }})
	h := m.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) }))
	size := func() int {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return len(b)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/x", nil))
	before := size()
	for i := range 2000 {
		method := strings.Repeat("M", 100) + string(rune('A'+i%26)) + strings.Repeat("Z", i%50)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, "/api/v1alpha1/"+strings.Repeat("p", i), nil))
	}
	if after := size(); after > before+200 {
		t.Errorf("/metrics grew from %d to %d bytes", before, after)
	}
}

// The registration's failure is one series per reason of a fixed set, 1 for the current
// one: the registry's answer is never a label.
func TestRegistrationErrorIsABoundedLabel(t *testing.T) {
	reason := "unreachable"
	m := New(Gauges{RegistrationError: func() string { return reason }, RegistrationErrors: []string{"unreachable", "rejected"}})
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	out := scrape()
	if !strings.Contains(out, `sp_registration_error{reason="unreachable"} 1`) || !strings.Contains(out, `sp_registration_error{reason="rejected"} 0`) {
		t.Errorf("metrics:\n%s", out)
	}
	reason = "" // registered
	if out := scrape(); strings.Contains(out, `sp_registration_error{reason="unreachable"} 1`) || strings.Count(out, "sp_registration_error{") != 2 {
		t.Errorf("after a success:\n%s", out)
	}
}
