package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/app"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// provider is one running instance of the service, serving on a loopback port.
type provider struct {
	URL string
	App *app.App
	// Requests counts the requests this instance sent to the apiserver.
	Requests *atomic.Int64
	// calls lists them, each with what sent it (see apiCall).
	calls *apiCalls
	// Stop shuts the provider down gracefully (also done when the test ends).
	Stop func()
	logs *testWriter
}

// Logs is everything the provider logged (warnings and errors).
func (p *provider) Logs() string {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	return p.logs.buf.String()
}

type providerOpt func(*config.Config, *rest.Config)

// defaultEndpoint marks a provider whose SP_ENDPOINT no option chose: it becomes the
// provider's own URL.
const defaultEndpoint = "http://endpoint.unset.invalid:8080"

// noNATS marks a provider for which no option chose a NATS server: it gets its own.
const noNATS = "nats://unset.invalid:4222"

// withNATS points the provider at a given NATS server.
func withNATS(url string) providerOpt {
	return func(c *config.Config, _ *rest.Config) { c.NATSURL = url }
}

// withEnv applies environment-style settings on top of the defaults.
func withEnv(kv ...string) providerOpt {
	return func(c *config.Config, _ *rest.Config) {
		loaded, err := config.Load(append([]string{
			"SP_NAME=" + c.Name, "SP_ENDPOINT=" + c.Endpoint, "DCM_REGISTRATION_URL=" + c.RegistrationURL,
			"SP_NATS_URL=" + c.NATSURL, "SP_K8S_NAMESPACE=" + c.Kubernetes.Namespace,
			"SP_K8S_KUBECONFIG=" + c.Kubernetes.Kubeconfig, "SP_SERVER_ADDRESS=" + c.Server.Address,
			"SP_MONITOR_STATUS_RESEND_AFTER=" + c.Monitor.StatusResendAfter.String(),
			"SP_IMAGE_REGISTRIES=" + c.Tenants.ImageRegistries, fmt.Sprintf("SP_IMAGE_RESOLVE=%t", c.Images.Resolve),
		}, kv...))
		if err != nil {
			panic(err)
		}
		*c = *loaded
	}
}

// startProvider runs the real service (app.New + Run, as the binary does) against the
// test cluster, in namespace ns, and stops it when the test ends.
func startProvider(t *testing.T, ns string, opts ...providerOpt) *provider {
	t.Helper()
	env := testenv.Cluster(t)
	cfg, err := config.Load([]string{
		"SP_NAME=k8s-container-sp", "SP_ENDPOINT=" + defaultEndpoint,
		"DCM_REGISTRATION_URL=http://127.0.0.1:1/api/v1alpha1", "SP_NATS_URL=" + noNATS,
		"SP_K8S_NAMESPACE=" + ns, "SP_K8S_KUBECONFIG=" + env.Kubeconfig,
		// Off unless a test turns it on: the tests count a container's events, and a
		// resend 15 s after its first status would land in the middle of some of them.
		"SP_MONITOR_STATUS_RESEND_AFTER=0",
		"SP_IMAGE_REGISTRIES=" + harness.ImageRegistries, harness.ResolveOff,
	})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := app.RESTConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	count, calls := &atomic.Int64{}, &apiCalls{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{rt: rt, n: count, calls: calls}
	})
	for _, o := range opts {
		o(cfg, rc)
	}
	if cfg.NATSURL == noNATS {
		// With the registry's stream, as DCM runs: without one a DELETED is never
		// taken as delivered, and its record stays.
		srv, _ := natsWithStream(t)
		cfg.NATSURL = srv.URL
	}
	logs := &testWriter{t: t}
	// Listen where the configuration says when a test chose an address (a restarted
	// provider keeps its registered endpoint), else on a free loopback port.
	addr := "127.0.0.1:0"
	if cfg.Server.Address != ":8080" {
		addr = cfg.Server.Address
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoint == defaultEndpoint {
		cfg.Endpoint = "http://" + ln.Addr().String()
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: testLogLevel()}))
	a, err := app.New(cfg, rc, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, ln) }()
	p := &provider{URL: "http://" + ln.Addr().String(), App: a, Requests: count, calls: calls, logs: logs}
	p.Stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("provider stopped with %v", err)
		}
		logs.stop()
	})
	t.Cleanup(p.Stop)
	return p
}

// metric sums the samples of one series on the provider's /metrics.
func (p *provider) metric(t *testing.T, name string) float64 {
	t.Helper()
	r := do(t, http.MethodGet, p.URL+"/metrics", nil)
	sum := 0.0
	for _, line := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}

// waitIdle waits until the provider's controller has nothing left to deliver: no change
// held by the debounce, none queued.
func (p *provider) waitIdle(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "status controller idle", func() error {
		if n := p.App.Controller().Pending(); n > 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
}

// waitSynced waits until the provider's caches are loaded.
func (p *provider) waitSynced(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !p.App.Store().WaitForSync(ctx) {
		t.Fatal("informer caches did not sync")
	}
}

// waitReporting waits until the provider's caches are loaded and its status controller
// leads and has queued its start-up republish. A test that counts events waits for it
// before it creates: a container created earlier has its status sent twice, once as a
// change and once by the republish, as the controller means to.
func (p *provider) waitReporting(t *testing.T) {
	t.Helper()
	p.waitSynced(t)
	testenv.Eventually(t, 30*time.Second, "controller active", func() error {
		if !p.App.Controller().Active() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// Calls lists the requests this instance sent to the apiserver so far, in order.
func (p *provider) Calls() []apiCall { return p.calls.list() }

// apiCall is one request an instance sent to the apiserver.
type apiCall struct {
	Kind string // method and path, e.g. "GET /readyz"
	// Serving: sent with the context of an HTTP request the instance was answering
	// (net/http puts the connection's local address in it), so caused by one of its
	// handlers, not by its background work (the API probe, the election's renewals, the
	// permission check, the informers, the status controller), which runs on the
	// instance's own context.
	Serving bool
}

func (c apiCall) String() string {
	if c.Serving {
		return c.Kind + " (serving)"
	}
	return c.Kind
}

// apiCalls records an instance's apiserver requests.
type apiCalls struct {
	mu    sync.Mutex
	calls []apiCall
}

func (a *apiCalls) add(c apiCall) {
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
}

func (a *apiCalls) list() []apiCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]apiCall(nil), a.calls...)
}

// countingTransport counts requests to the apiserver, and records what each was.
type countingTransport struct {
	rt    http.RoundTripper
	n     *atomic.Int64
	calls *apiCalls
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	_, serving := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	c.calls.add(apiCall{Kind: r.Method + " " + r.URL.Path, Serving: serving})
	return c.rt.RoundTrip(r)
}

// WrappedRoundTripper lets client-go reach the transport underneath (to cancel requests).
func (c *countingTransport) WrappedRoundTripper() http.RoundTripper { return c.rt }

// testWriter keeps the provider's log lines and copies them to the test log (shown on
// failure) until the test ends.
type testWriter struct {
	t       *testing.T
	mu      sync.Mutex
	buf     bytes.Buffer
	stopped bool
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if !w.stopped {
		w.t.Log(strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

// response is a decoded HTTP answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

// problemPointers lists where a problem's violations are: its pointer when it has one
// violation, else every errors entry's pointer in order ("-" for an entry without one,
// e.g. about the id query parameter).
func (r response) problemPointers() []string {
	errs, _ := r.JSON["errors"].([]any)
	if len(errs) == 0 {
		if p, ok := r.JSON["pointer"].(string); ok {
			return []string{p}
		}
		return []string{"-"}
	}
	var out []string
	for _, e := range errs {
		p, ok := e.(map[string]any)["pointer"].(string)
		if !ok {
			p = "-"
		}
		out = append(out, p)
	}
	return out
}

func do(t *testing.T, method, url string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if len(b) > 0 && (strings.Contains(resp.Header.Get("Content-Type"), "json")) {
		if err := json.Unmarshal(b, &out.JSON); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, url, err, b)
		}
	}
	return out
}

// expectProblem checks a problem+json answer.
func expectProblem(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json: %s", ct, r.Body)
	}
	if r.JSON["type"] != "https://dcm-project.github.io/problems/"+code || r.JSON["status"] != float64(status) || r.JSON["title"] == "" {
		t.Fatalf("problem = %s, want type .../%s", r.Body, code)
	}
}

// spec builds a container create body; edit may change the spec map.
func spec(name, image string, edit ...func(s map[string]any)) map[string]any {
	s := map[string]any{
		"service_type": "container",
		"metadata":     map[string]any{"name": name},
		"image":        map[string]any{"reference": image},
		"resources": map[string]any{
			"cpu":    map[string]any{"min": 1, "max": 2},
			"memory": map[string]any{"min": "64MB", "max": "128MB"},
		},
	}
	for _, e := range edit {
		e(s)
	}
	return map[string]any{"spec": s}
}

func withPorts(ports ...map[string]any) func(s map[string]any) {
	return func(s map[string]any) {
		list := make([]any, len(ports))
		for i, p := range ports {
			list[i] = p
		}
		s["network"] = map[string]any{"ports": list}
	}
}

func port(n int, visibility string) map[string]any {
	return map[string]any{"container_port": n, "visibility": visibility}
}

// testLogLevel: warnings and errors, or everything with SP_TEST_LOG=debug.
func testLogLevel() slog.Level {
	if os.Getenv("SP_TEST_LOG") == "debug" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
