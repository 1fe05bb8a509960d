// Package agent is a test double of DCM's environment agent, the part a container
// provider meets: provider registration (POST /api/v1alpha1/providers), the health poll
// of every registered provider, and the forwarding of creates and deletes to a provider
// in the agent's shape. It follows the agent's published contract (openapi.yaml here,
// written from dcm-project/environment-agent): the real agent is not on the Go module
// proxy, so it cannot be built or run on these machines (docs/testing.md).
package agent

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
)

//go:embed openapi.yaml
var contract []byte

// Provider is a registered provider as the agent keeps it.
type Provider struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Endpoint    string          `json:"endpoint"`
	ServiceType string          `json:"service_type"`
	Body        json.RawMessage `json:"-"` // the registration as sent
	Status      string          `json:"status"`
	failures    int
}

// Options shape the double.
type Options struct {
	// Embedded are the service types its embedded providers serve: a registration for
	// one of them is a 409 (DCM's chart's default is container).
	Embedded []string
	// PollInterval of the health poll (the agent's is 10 s), PollTimeout of each poll
	// (5 s); after Failures failed polls in a row (3) a provider is Unhealthy.
	PollInterval, PollTimeout time.Duration
	Failures                  int
}

// Agent is a running double on a loopback port.
type Agent struct {
	// URL is its API base, as DCM_REGISTRATION_URL: http://127.0.0.1:PORT/api/v1alpha1.
	URL string

	opts   Options
	router routers.Router
	srv    *http.Server
	stop   context.CancelFunc
	done   sync.WaitGroup

	mu        sync.Mutex
	providers map[string]*Provider // by name
	attempts  []int                // every registration's answer, in order
}

// Start serves the double on a free loopback port and polls its providers' health.
func Start(opts Options) (*Agent, error) {
	opts.PollInterval = orDefault(opts.PollInterval, 10*time.Second)
	opts.PollTimeout = orDefault(opts.PollTimeout, 5*time.Second)
	if opts.Failures <= 0 {
		opts.Failures = 3
	}
	doc, err := openapi3.NewLoader().LoadFromData(contract)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &Agent{URL: "http://" + ln.Addr().String() + "/api/v1alpha1", opts: opts, router: router,
		providers: map[string]*Provider{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1alpha1/providers", a.register)
	mux.HandleFunc("GET /api/v1alpha1/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy", "path": "health"})
	})
	mux.HandleFunc("GET /api/v1alpha1/status", a.status)
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	a.done.Go(func() { _ = a.srv.Serve(ln) })
	a.done.Go(func() { a.poll(ctx) })
	return a, nil
}

// Close stops it.
func (a *Agent) Close() {
	a.stop()
	_ = a.srv.Close()
	a.done.Wait()
}

// Provider is the registered provider named name, if any.
func (a *Agent) Provider(name string) (Provider, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.providers[name]
	if !ok {
		return Provider{}, false
	}
	return *p, true
}

// Attempts are the status codes of every registration answered so far.
func (a *Agent) Attempts() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.attempts...)
}

func (a *Agent) register(w http.ResponseWriter, r *http.Request) {
	code, body := a.registration(r)
	a.mu.Lock()
	a.attempts = append(a.attempts, code)
	a.mu.Unlock()
	if code >= 400 {
		writeProblem(w, code, body.(string))
		return
	}
	writeJSON(w, code, body)
}

// registration decides a POST /providers: 400 for what the contract's schema refuses,
// 422 for a schema version it does not know, 409 for a service type served by another
// provider, else 201 (new name) or 200 (known name, updated).
func (a *Agent) registration(r *http.Request) (int, any) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return http.StatusBadRequest, "reading the body: " + err.Error()
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	route, params, err := a.router.FindRoute(r)
	if err != nil {
		return http.StatusNotFound, err.Error()
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true}}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		return http.StatusBadRequest, err.Error()
	}
	var p struct {
		Name          string `json:"name"`
		Endpoint      string `json:"endpoint"`
		ServiceType   string `json:"service_type"`
		SchemaVersion string `json:"schema_version"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return http.StatusBadRequest, err.Error()
	}
	if p.SchemaVersion != "v1alpha1" {
		return http.StatusUnprocessableEntity, fmt.Sprintf("schema_version %q is not supported (v1alpha1 is)", p.SchemaVersion)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.opts.Embedded {
		if t == p.ServiceType {
			return http.StatusConflict, fmt.Sprintf("service type '%s' is already served by embedded provider '%s'", t, t)
		}
	}
	for _, q := range a.providers {
		if q.ServiceType == p.ServiceType && q.Name != p.Name {
			return http.StatusConflict, fmt.Sprintf("service type '%s' is already served by provider '%s'", p.ServiceType, q.Name)
		}
	}
	code := http.StatusOK
	q, ok := a.providers[p.Name]
	if !ok {
		code = http.StatusCreated
		id := r.URL.Query().Get("id")
		if id == "" {
			id = uuid.NewString()
		}
		q = &Provider{ID: id, Name: p.Name, Status: "Unavailable"}
		a.providers[p.Name] = q
	}
	q.Endpoint, q.ServiceType, q.Body = p.Endpoint, p.ServiceType, raw
	return code, map[string]any{"id": q.ID, "path": "providers/" + q.ID, "name": q.Name, "endpoint": q.Endpoint, "service_type": q.ServiceType}
}

func (a *Agent) status(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	var list []map[string]string
	for _, p := range a.providers {
		list = append(list, map[string]string{"provider_id": p.ID, "name": p.Name, "service_type": p.ServiceType, "type": "external", "status": p.Status})
	}
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"path": "status", "providers": list})
}

// poll checks every registered provider's GET {endpoint}/health each interval: 200 with
// a JSON status "healthy" (any case) is Ready; Failures failures in a row, Unhealthy.
func (a *Agent) poll(ctx context.Context) {
	client := &http.Client{Timeout: a.opts.PollTimeout}
	t := time.NewTicker(a.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		var ps []*Provider
		for _, p := range a.providers {
			ps = append(ps, p)
		}
		a.mu.Unlock()
		for _, p := range ps {
			healthy := healthOf(ctx, client, strings.TrimSuffix(p.Endpoint, "/")+"/health")
			a.mu.Lock()
			switch {
			case healthy:
				p.Status, p.failures = "Ready", 0
			case p.failures+1 >= a.opts.Failures:
				p.Status, p.failures = "Unhealthy", p.failures+1
			default:
				p.failures++
			}
			a.mu.Unlock()
		}
	}
}

func healthOf(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct{ Status string }
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && strings.EqualFold(h.Status, "healthy")
}

// Answer is a provider's final answer to a forwarded request.
type Answer struct {
	Status int
	Body   []byte
	// Tries is how many times it was sent.
	Tries int
}

// Create forwards a create as the agent does: POST {endpoint} with the bare spec as the
// body, Idempotency-Key: eventID (the same on every try), no id; tried again on
// transport errors, 5xx and 429 (each try to the next of endpoints, round robin, so a
// retry can reach another replica) until an answer is final or ctx ends.
func Create(ctx context.Context, endpoints []string, spec json.RawMessage, eventID string) (Answer, error) {
	return forward(ctx, http.MethodPost, endpoints, "", spec, eventID)
}

// Delete forwards a delete as the agent does: DELETE {endpoint}/{resourceID} with the
// Idempotency-Key header, tried again like Create.
func Delete(ctx context.Context, endpoints []string, resourceID, eventID string) (Answer, error) {
	return forward(ctx, http.MethodDelete, endpoints, "/"+resourceID, nil, eventID)
}

func forward(ctx context.Context, method string, endpoints []string, suffix string, body []byte, key string) (Answer, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	delay := 100 * time.Millisecond
	for try := 1; ; try++ {
		url := strings.TrimSuffix(endpoints[(try-1)%len(endpoints)], "/") + suffix
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return Answer{}, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
				return Answer{Status: resp.StatusCode, Body: b, Tries: try}, nil
			}
		}
		select {
		case <-ctx.Done():
			return Answer{Tries: try}, errors.Join(ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, code int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(code), "status": code, "detail": detail})
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
