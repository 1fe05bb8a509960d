package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// waits is a Sleep that returns at once and records what it was asked to wait.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

func (w *waits) got() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}

// request is what the provider was sent.
type request struct {
	method, path, query, key, auth, body string
}

// provider is a provider that answers each request with the next of answers (the last
// repeats; code 0: the connection is cut) and records the requests.
type provider struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	health   func() (int, string)
}

func newProvider(t *testing.T, answers ...int) *provider {
	t.Helper()
	p := &provider{health: func() (int, string) { return 200, `{"status":"healthy"}` }}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/health") {
			p.mu.Lock()
			code, body := p.health()
			p.mu.Unlock()
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
			return
		}
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.requests = append(p.requests, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), string(b)})
		code := answers[min(len(p.requests), len(answers))-1]
		p.mu.Unlock()
		if code == 0 {
			panic(http.ErrAbortHandler) // no answer: the connection is cut
		}
		w.Header().Set("Retry-After", "1") // ignored by the agent
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"id":"c1"}`)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) sent() []request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

func (p *provider) setHealth(code int, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health = func() (int, string) { return code, body }
}

// A create carries the bare spec, no ?id=, the same Idempotency-Key on every try and no
// Authorization header; 5xx, 429 and no answer are tried again, 3 tries in all, 2 s and
// 4 s apart whatever Retry-After says, then RETRY_EXHAUSTED; any other answer is final.
func TestCreateRetries(t *testing.T) {
	spec := json.RawMessage(`{"metadata":{"name":"web"}}`)
	for _, tc := range []struct {
		name      string
		answers   []int
		wantTries int
		wantCode  int
		outcome   Outcome
	}{
		{"created", []int{201}, 1, 201, ""},
		{"503 then created", []int{503, 201}, 2, 201, ""},
		{"429, no answer, created", []int{429, 0, 201}, 3, 201, ""},
		{"always 503", []int{503}, 3, 503, RetryExhausted},
		{"always cut", []int{0}, 3, 0, RetryExhausted},
		{"500, 502, then 422", []int{500, 502, 422}, 3, 422, NonRetryable},
		{"401: no token", []int{401}, 1, 401, NonRetryable},
		{"409 is final", []int{409}, 1, 409, NonRetryable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, tc.answers...)
			var w waits
			// A new connection each try: Go's transport itself replays a request with an
			// Idempotency-Key that a reused connection lost, which would hide a try here.
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			ans, err := Forwarder{Endpoints: []string{p.URL + "/api/v1alpha1/containers"}, Sleep: w.sleep, Client: client}.Create(context.Background(), spec, "event-1")
			if ans.Tries != tc.wantTries || ans.Status != tc.wantCode || ans.Outcome != tc.outcome {
				t.Errorf("answer %+v, want %d tries, %d, %q", ans, tc.wantTries, tc.wantCode, tc.outcome)
			}
			if exhausted := errors.Is(err, ErrRetryExhausted); exhausted != (tc.outcome == RetryExhausted) || (!exhausted && err != nil) {
				t.Errorf("error %v", err)
			}
			if want := Backoff[:tc.wantTries-1]; !slices.Equal(w.got(), want) {
				t.Errorf("waited %v, want %v", w.got(), want)
			}
			sent := p.sent()
			if len(sent) != tc.wantTries {
				t.Fatalf("%d requests", len(sent))
			}
			for _, r := range sent {
				if r.method != http.MethodPost || r.path != "/api/v1alpha1/containers" || r.query != "" || r.key != "event-1" || r.auth != "" || r.body != string(spec) {
					t.Errorf("sent %+v", r)
				}
			}
		})
	}
}

// A delete names the id it is given; a 404 (the provider does not know DCM's id) is
// final, like every 4xx but 429; 5xx is tried again.
func TestDelete(t *testing.T) {
	for _, tc := range []struct {
		answers   []int
		wantTries int
		outcome   Outcome
	}{
		{[]int{204}, 1, ""},
		{[]int{404}, 1, NonRetryable},
		{[]int{401}, 1, NonRetryable},
		{[]int{503, 404}, 2, NonRetryable},
		{[]int{500}, 3, RetryExhausted},
	} {
		p := newProvider(t, tc.answers...)
		var w waits
		ans, err := Forwarder{Endpoints: []string{p.URL + "/api/v1alpha1/containers/"}, Sleep: w.sleep}.Delete(context.Background(), "dcm-id-1", "event-2")
		if ans.Tries != tc.wantTries || ans.Outcome != tc.outcome || (err != nil) != (tc.outcome == RetryExhausted) {
			t.Errorf("%v: answer %+v, %v", tc.answers, ans, err)
		}
		for _, r := range p.sent() {
			if r.method != http.MethodDelete || r.path != "/api/v1alpha1/containers/dcm-id-1" || r.key != "event-2" || r.auth != "" {
				t.Errorf("%v: sent %+v", tc.answers, r)
			}
		}
	}
}

// A wait that ctx ends ends the request.
func TestRetryEndsWithContext(t *testing.T) {
	p := newProvider(t, 503)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ans, err := Forwarder{Endpoints: []string{p.URL}}.Create(ctx, json.RawMessage(`{}`), "k")
	if !errors.Is(err, context.Canceled) || ans.Tries > 1 {
		t.Errorf("%+v %v", ans, err)
	}
}

func register(t *testing.T, a *Agent, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(a.URL+"/providers", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func start(t *testing.T, opts Options) *Agent {
	t.Helper()
	opts.PollInterval = time.Hour // the test steps the poll with PollOnce
	a, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func registration(endpoint, cpu string) string {
	return `{"name":"sp","endpoint":"` + endpoint + `","service_type":"container","schema_version":"v1alpha1",` +
		`"metadata":{"resources":{"total_cpu":` + cpu + `}}}`
}

// The agent takes total_cpu only as a string: a number is a 400 problem; the string is
// 201, then 200 with the same id; the answer says the provider is external.
func TestRegistrationTakesCPUAsString(t *testing.T) {
	a := start(t, Options{})
	code, m := register(t, a, registration("http://sp:8080/api/v1alpha1/containers", "200"))
	if code != http.StatusBadRequest || !strings.Contains(m["detail"].(string), "total_cpu") {
		t.Errorf("a number: %d %v", code, m)
	}
	if _, ok := a.Provider("sp"); ok {
		t.Error("registered with a number")
	}
	code, m = register(t, a, registration("http://sp:8080/api/v1alpha1/containers", `"200"`))
	if code != http.StatusCreated || m["type"] != "external" || m["status"] != Unavailable || m["id"] == "" {
		t.Errorf("a string: %d %v", code, m)
	}
	code2, m2 := register(t, a, registration("http://sp:8080/api/v1alpha1/containers", `"200"`))
	if code2 != http.StatusOK || m2["id"] != m["id"] {
		t.Errorf("again: %d %v", code2, m2)
	}
	if got := a.Attempts(); !slices.Equal(got, []int{400, 201, 200}) {
		t.Errorf("attempts %v", got)
	}
}

// Ready on a healthy poll; Unhealthy on an unhealthy answer or a failed poll;
// Unavailable at the third failed poll in a row (never on unhealthy answers alone);
// Ready again on a healthy poll.
func TestHealthStates(t *testing.T) {
	p := newProvider(t, 201)
	a := start(t, Options{})
	if code, _ := register(t, a, registration(p.URL+"/api/v1alpha1/containers", `"4"`)); code != http.StatusCreated {
		t.Fatal(code)
	}
	healthy, unhealthy := `{"status":"healthy"}`, `{"status":"unhealthy"}`
	for i, step := range []struct {
		code int
		body string
		want string
	}{
		{200, healthy, Ready},
		{200, unhealthy, Unhealthy},
		{200, unhealthy, Unhealthy},
		{200, unhealthy, Unhealthy},
		{200, "HEALTHY", Unhealthy}, // no JSON: a failed poll
		{200, `{"status":"Healthy"}`, Ready},
		{500, healthy, Unhealthy},
		{503, "", Unhealthy},
		{200, unhealthy, Unhealthy}, // the failed polls' count starts again
		{500, "", Unhealthy},
		{404, "", Unhealthy},
		{500, "", Unavailable},
		{500, "", Unavailable},
		{200, unhealthy, Unhealthy},
		{200, healthy, Ready},
	} {
		p.setHealth(step.code, step.body)
		a.PollOnce(context.Background())
		if got, _ := a.Provider("sp"); got.Status != step.want {
			t.Fatalf("step %d (%d %s): %s, want %s", i, step.code, step.body, got.Status, step.want)
		}
	}
	p.Close() // no answer at all
	for i, want := range []string{Unhealthy, Unhealthy, Unavailable} {
		a.PollOnce(context.Background())
		if got, _ := a.Provider("sp"); got.Status != want {
			t.Fatalf("closed, poll %d: %s, want %s", i+1, got.Status, want)
		}
	}
}

// Forwarding through the agent follows the provider's health: Unavailable (before any
// poll, say) refuses at once and sends nothing; Unhealthy holds the create until a poll
// finds it Ready.
func TestForwardingFollowsHealth(t *testing.T) {
	p := newProvider(t, 201)
	var w waits
	a := start(t, Options{Sleep: w.sleep})
	if code, _ := register(t, a, registration(p.URL+"/api/v1alpha1/containers", `"4"`)); code != http.StatusCreated {
		t.Fatal(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Create(ctx, "sp", json.RawMessage(`{}`), "k1"); !errors.Is(err, ErrUnavailable) || len(p.sent()) != 0 {
		t.Errorf("Unavailable: %v, %d sent", err, len(p.sent()))
	}
	p.setHealth(200, `{"status":"unhealthy"}`)
	a.PollOnce(ctx)
	done := make(chan Answer)
	go func() {
		ans, _ := a.Create(ctx, "sp", json.RawMessage(`{}`), "k2")
		done <- ans
	}()
	time.Sleep(100 * time.Millisecond)
	if n := len(p.sent()); n != 0 {
		t.Fatalf("sent %d while Unhealthy", n)
	}
	p.setHealth(200, `{"status":"healthy"}`)
	a.PollOnce(ctx)
	if ans := <-done; ans.Status != http.StatusCreated || len(p.sent()) != 1 || p.sent()[0].key != "k2" {
		t.Errorf("once Ready: %+v, sent %+v", ans, p.sent())
	}
	if ans, err := a.Delete(ctx, "sp", "dcm-id", "k3"); err != nil || ans.Tries != 1 {
		t.Errorf("delete: %+v %v", ans, err)
	}
}
