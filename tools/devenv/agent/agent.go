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
	"net/url"
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

// The health states of a registered provider, as the agent's status shows them.
const (
	// Ready: its last poll answered 200 {"status": "healthy"}; requests are forwarded.
	Ready = "Ready"
	// Unhealthy: its last poll answered {"status": "unhealthy"}, or failed (fewer than
	// Failures in a row); requests are held (queued) until it is Ready again.
	Unhealthy = "Unhealthy"
	// Unavailable: Failures polls in a row failed (or none has been answered since it
	// registered); creates are refused at once and the agent withdraws the service type
	// from DCM. A healthy poll brings it back to Ready.
	Unavailable = "Unavailable"
)

// Provider is a registered provider as the agent keeps it.
type Provider struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Endpoint    string          `json:"endpoint"`
	ServiceType string          `json:"service_type"`
	Body        json.RawMessage `json:"-"` // the registration as sent
	Status      string          `json:"status"`
	// Failures is the count of failed polls in a row.
	Failures int `json:"-"`
	// Polls is how many health polls it has been sent.
	Polls int `json:"-"`
}

// Options shape the double.
type Options struct {
	// Embedded are the service types its embedded providers serve: a registration for
	// one of them is a 409 (DCM's chart's default is container).
	Embedded []string
	// PollInterval of the health poll (the agent's is 10 s), PollTimeout of each poll
	// (5 s); after Failures failed polls in a row (3) a provider is Unavailable.
	PollInterval, PollTimeout time.Duration
	Failures                  int
	// Sleep waits between the tries of a forwarded request (nil: a timer that ctx
	// ends): tests pass one that returns at once and records the waits.
	Sleep func(ctx context.Context, d time.Duration) error
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

	pollMu    sync.Mutex // one poll round at a time
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
		q = &Provider{ID: id, Name: p.Name, Status: Unavailable}
		a.providers[p.Name] = q
	}
	q.Endpoint, q.ServiceType, q.Body = p.Endpoint, p.ServiceType, raw
	return code, map[string]any{"id": q.ID, "path": "providers/" + q.ID, "name": q.Name, "endpoint": q.Endpoint,
		"service_type": q.ServiceType, "schema_version": p.SchemaVersion, "type": "external", "status": q.Status}
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

// poll runs PollOnce each interval.
func (a *Agent) poll(ctx context.Context) {
	t := time.NewTicker(a.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.PollOnce(ctx)
	}
}

// PollOnce checks every registered provider's GET {endpoint}/health now (the ticker does
// so each PollInterval; tests call it to step the state): 200 with a JSON status
// "healthy" (any case) is Ready; "unhealthy" is Unhealthy (the failed polls' count
// starts again); any other answer (not 200, no JSON status) or none in PollTimeout is a
// failed poll: Unhealthy, and Unavailable at the Failures-th in a row.
func (a *Agent) PollOnce(ctx context.Context) {
	a.pollMu.Lock()
	defer a.pollMu.Unlock()
	client := &http.Client{Timeout: a.opts.PollTimeout}
	a.mu.Lock()
	var ps []*Provider
	for _, p := range a.providers {
		ps = append(ps, p)
	}
	a.mu.Unlock()
	for _, p := range ps {
		a.mu.Lock()
		endpoint := p.Endpoint
		a.mu.Unlock()
		result := healthOf(ctx, client, strings.TrimSuffix(endpoint, "/")+"/health")
		a.mu.Lock()
		p.Polls++
		switch result {
		case checkHealthy:
			p.Status, p.Failures = Ready, 0
		case checkUnhealthy:
			p.Status, p.Failures = Unhealthy, 0
		default:
			p.Failures++
			if p.Failures >= a.opts.Failures {
				p.Status = Unavailable
			} else if p.Status != Unavailable {
				p.Status = Unhealthy
			}
		}
		a.mu.Unlock()
	}
}

type check int

const (
	checkHealthy check = iota
	checkUnhealthy
	checkFailed
)

func healthOf(ctx context.Context, client *http.Client, url string) check {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return checkFailed
	}
	resp, err := client.Do(req)
	if err != nil {
		return checkFailed
	}
	defer resp.Body.Close()
	var h struct{ Status string }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&h) != nil {
		return checkFailed
	}
	switch strings.ToLower(h.Status) {
	case "healthy":
		return checkHealthy
	case "unhealthy":
		return checkUnhealthy
	}
	return checkFailed
}

// Outcome is how the agent ends a forwarded request that did not succeed, as it reports
// it to DCM.
type Outcome string

const (
	// NonRetryable: a final answer that is no success (any 4xx but 429, a 404 of a
	// delete included): not tried again.
	NonRetryable Outcome = "NON_RETRYABLE_SP_ERROR"
	// RetryExhausted: every try failed in a way that is retried (5xx, 429, no answer).
	RetryExhausted Outcome = "RETRY_EXHAUSTED"
)

// Tries and Backoff are the agent's retry of a forwarded request: Tries in all, the
// waits between them Backoff's (2 s, then 4 s); a Retry-After in the answer is ignored.
const Tries = 3

// Backoff are the waits before the second and the third try.
var Backoff = []time.Duration{2 * time.Second, 4 * time.Second}

// ErrRetryExhausted: no try of a forwarded request had a final answer.
var ErrRetryExhausted = errors.New("agent: " + string(RetryExhausted))

// ErrUnavailable: the provider is Unavailable; the agent refuses the request at once.
var ErrUnavailable = errors.New("agent: the provider is Unavailable")

// Answer is a provider's last answer to a forwarded request.
type Answer struct {
	Status int // 0: no answer
	Body   []byte
	// Tries is how many times it was sent.
	Tries int
	// Outcome is "" on a success (2xx), else how the agent ended it.
	Outcome Outcome
}

// Forwarder sends creates and deletes as the agent does. The agent knows one endpoint
// per provider; Endpoints may name several, try n going to the nth (round robin), to
// stand for a Service that spreads the agent's tries over the provider's replicas.
type Forwarder struct {
	Endpoints []string // the provider's registered endpoint(s): .../api/v1alpha1/containers
	// Sleep waits between tries (nil: a timer that ctx ends).
	Sleep func(ctx context.Context, d time.Duration) error
	// Client sends the requests (nil: one with a 30 s timeout).
	Client *http.Client
}

// Create forwards a create as the agent does: POST {endpoint} with the bare spec as the
// body, no ?id= (the provider names the container), Idempotency-Key: key (the same on
// every try) and no Authorization header; tried again on 5xx, 429 and transport errors,
// Tries times in all with Backoff's waits, whatever Retry-After says. The error is
// ErrRetryExhausted when no try had a final answer, or ctx's; a final answer that is
// no success is an Answer with Outcome NonRetryable and no error.
func (f Forwarder) Create(ctx context.Context, spec json.RawMessage, key string) (Answer, error) {
	return f.forward(ctx, http.MethodPost, "", spec, key)
}

// Delete forwards a delete as the agent does: DELETE {endpoint}/{resourceID}, where the
// real agent's resourceID is DCM's own id (which a create without ?id= never told the
// provider), with the Idempotency-Key header and no Authorization header; retried like
// Create, and a 404 is final (NonRetryable) like every other 4xx but 429.
func (f Forwarder) Delete(ctx context.Context, resourceID, key string) (Answer, error) {
	return f.forward(ctx, http.MethodDelete, "/"+url.PathEscape(resourceID), nil, key)
}

// Create is Forwarder{Endpoints: endpoints}.Create.
func Create(ctx context.Context, endpoints []string, spec json.RawMessage, key string) (Answer, error) {
	return Forwarder{Endpoints: endpoints}.Create(ctx, spec, key)
}

// Delete is Forwarder{Endpoints: endpoints}.Delete.
func Delete(ctx context.Context, endpoints []string, resourceID, key string) (Answer, error) {
	return Forwarder{Endpoints: endpoints}.Delete(ctx, resourceID, key)
}

func (f Forwarder) forward(ctx context.Context, method, suffix string, body []byte, key string) (Answer, error) {
	if len(f.Endpoints) == 0 {
		return Answer{}, errors.New("agent: no endpoint")
	}
	client := f.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	sleep := f.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	var last Answer
	var lastErr error
	for try := 1; try <= Tries; try++ {
		if try > 1 {
			if err := sleep(ctx, Backoff[min(try-2, len(Backoff)-1)]); err != nil {
				last.Tries = try - 1
				return last, errors.Join(err, lastErr)
			}
		}
		u := strings.TrimSuffix(f.Endpoints[(try-1)%len(f.Endpoints)], "/") + suffix
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return Answer{Tries: try}, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			last, lastErr = Answer{Tries: try}, err
			if ctx.Err() != nil {
				return last, err
			}
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last, lastErr = Answer{Status: resp.StatusCode, Body: b, Tries: try}, nil
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return last, nil
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			continue
		default:
			last.Outcome = NonRetryable
			return last, nil
		}
	}
	last.Outcome = RetryExhausted
	return last, errors.Join(fmt.Errorf("%w after %d tries", ErrRetryExhausted, Tries), lastErr)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Create forwards a create DCM routed to the provider registered as name, gated by its
// health as the agent gates it: Ready, sent at once (as Forwarder.Create); Unhealthy,
// held until a poll finds it Ready (refused when it turns Unavailable meanwhile);
// Unavailable, refused at once with ErrUnavailable.
func (a *Agent) Create(ctx context.Context, name string, spec json.RawMessage, key string) (Answer, error) {
	f, err := a.forwarder(ctx, name)
	if err != nil {
		return Answer{}, err
	}
	return f.Create(ctx, spec, key)
}

// Delete forwards a delete to the provider registered as name, gated like Create.
func (a *Agent) Delete(ctx context.Context, name, resourceID, key string) (Answer, error) {
	f, err := a.forwarder(ctx, name)
	if err != nil {
		return Answer{}, err
	}
	return f.Delete(ctx, resourceID, key)
}

// forwarder waits while the provider is Unhealthy, and is its Forwarder once it is Ready.
func (a *Agent) forwarder(ctx context.Context, name string) (Forwarder, error) {
	for {
		a.mu.Lock()
		p, ok := a.providers[name]
		var status, endpoint string
		if ok {
			status, endpoint = p.Status, p.Endpoint
		}
		a.mu.Unlock()
		switch {
		case !ok:
			return Forwarder{}, fmt.Errorf("agent: no provider %q", name)
		case status == Ready:
			return Forwarder{Endpoints: []string{endpoint}, Sleep: a.opts.Sleep}, nil
		case status == Unavailable:
			return Forwarder{}, ErrUnavailable
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return Forwarder{}, err
		}
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
