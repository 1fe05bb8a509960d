package registration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	providerapi "github.com/dcm-project/service-provider-manager/api/v1alpha1/provider"
	providerclient "github.com/dcm-project/service-provider-manager/pkg/client/provider"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Phase of the registration.
type Phase string

const (
	Pending    Phase = "pending"    // not registered yet, trying
	Registered Phase = "registered" // the registry accepted us
	Rejected   Phase = "rejected"   // the registry refused our payload (configuration error)
)

// State is what the health endpoint, the log and the metrics show.
type State struct {
	Phase      Phase     `json:"status"`
	ProviderID string    `json:"provider_id,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	LastChange time.Time `json:"last_change"`
	// LastHTTPStatus is the registry's last answer: 201 new, 200 known.
	LastHTTPStatus int `json:"-"`
}

// Capacity is optional registration metadata; zero values are not sent.
type Capacity struct {
	TotalCPU     int
	TotalMemory  string
	TotalStorage string
	TotalNodes   int
}

// Options describe the provider to the registry.
type Options struct {
	RegistryURL string // base incl. version, e.g. http://registry:8080/api/v1alpha1
	Name        string
	DisplayName string
	Endpoint    string // SP_ENDPOINT; "/api/v1alpha1/containers" is appended
	Region      string
	Zone        string
	Capacity    Capacity
	// Interval between re-registrations once registered (0: never again).
	Interval time.Duration
	// Backoff of retries: first wait, doubling with jitter up to Cap.
	RetryBase, RetryCap time.Duration
	// Attempted is told the registry's answer to every attempt (0: none); optional.
	Attempted func(code int)
}

// Registrar keeps the provider registered.
type Registrar struct {
	opts   Options
	client *providerclient.ClientWithResponses
	log    *slog.Logger

	mu    sync.Mutex
	state State
}

// New builds a registrar; nothing is sent before Run.
func New(opts Options, log *slog.Logger) (*Registrar, error) {
	if opts.RetryBase <= 0 {
		opts.RetryBase = time.Second
	}
	if opts.RetryCap <= 0 {
		opts.RetryCap = time.Minute
	}
	c, err := providerclient.NewClientWithResponses(strings.TrimSuffix(opts.RegistryURL, "/"),
		providerclient.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		return nil, err
	}
	return &Registrar{opts: opts, client: c, log: log, state: State{Phase: Pending, LastChange: time.Now()}}, nil
}

// Payload is the registration body.
func (r *Registrar) Payload() providerapi.Provider {
	o := r.opts
	p := providerapi.Provider{
		Name:          o.Name,
		Endpoint:      strings.TrimSuffix(o.Endpoint, "/") + "/api/v1alpha1/containers",
		ServiceType:   "container",
		SchemaVersion: "v1alpha1",
		Operations:    &[]string{"CREATE", "DELETE", "READ"},
	}
	if o.DisplayName != "" {
		p.DisplayName = &o.DisplayName
	}
	md := providerapi.ProviderMetadata{}
	if o.Zone != "" {
		md.Zone = &o.Zone
	}
	if o.Region != "" {
		md.RegionCode = &o.Region
	}
	// Capacity only when configured, in the types the registry accepts (an integer
	// CPU count: the registry refuses "200" as a string).
	c := o.Capacity
	if c != (Capacity{}) {
		res := &providerapi.ResourceCapacity{}
		if c.TotalCPU > 0 {
			res.TotalCpu = &c.TotalCPU
		}
		if c.TotalMemory != "" {
			res.TotalMemory = &c.TotalMemory
		}
		if c.TotalStorage != "" {
			res.TotalStorage = &c.TotalStorage
		}
		if c.TotalNodes > 0 {
			res.TotalNode = &c.TotalNodes
		}
		md.Resources = res
	}
	if md.Zone != nil || md.RegionCode != nil || md.Resources != nil {
		p.Metadata = &md
	}
	return p
}

// State is the current registration state.
func (r *Registrar) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

func (r *Registrar) set(phase Phase, id, lastErr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.Phase != phase {
		r.state.LastChange = time.Now()
	}
	r.state.Phase, r.state.LastError = phase, lastErr
	if id != "" {
		r.state.ProviderID = id
	}
}

// Run waits until ready() succeeds (our own HTTP server answers), then registers, retries
// and re-registers until ctx ends.
func (r *Registrar) Run(ctx context.Context, ready func(context.Context) error) {
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return ready(ctx) == nil, nil
	}); err != nil {
		return
	}
	for ctx.Err() == nil {
		r.registerWithRetry(ctx)
		next := r.opts.Interval
		if r.State().Phase == Rejected {
			// A configuration error will not fix itself quickly, but the registry
			// may be reconfigured: try again now and then, loudly.
			next = max(r.opts.Interval, 5*time.Minute)
		}
		if next <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// registerWithRetry registers once, retrying transient failures with exponential
// backoff and jitter; it returns on success, on a permanent refusal, or when ctx ends.
func (r *Registrar) registerWithRetry(ctx context.Context) {
	backoff := wait.Backoff{Duration: r.opts.RetryBase, Factor: 2, Jitter: 0.3, Steps: 1 << 30, Cap: r.opts.RetryCap}
	for attempt := 1; ctx.Err() == nil; attempt++ {
		err := r.registerOnce(ctx)
		var perm *permanentError
		switch {
		case err == nil:
			return
		case errors.As(err, &perm):
			r.set(Rejected, "", err.Error())
			r.log.Error("registration refused by the DCM registry: configuration error (not retried until later)",
				"registry", r.opts.RegistryURL, "status", perm.status, "answer", perm.body)
			return
		}
		r.set(r.State().Phase, "", err.Error())
		delay := backoff.Step()
		r.log.Warn("registration failed; will retry", "registry", r.opts.RegistryURL, "attempt", attempt, "retry_in", delay.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

type permanentError struct {
	status int
	body   string
}

func (e *permanentError) Error() string {
	return fmt.Sprintf("registry answered %d: %s", e.status, e.body)
}

func (r *Registrar) registerOnce(ctx context.Context) error {
	resp, err := r.client.CreateProviderWithResponse(ctx, nil, r.Payload())
	if err != nil {
		if r.opts.Attempted != nil {
			r.opts.Attempted(0)
		}
		return err // transport: retry
	}
	code := resp.StatusCode()
	if r.opts.Attempted != nil {
		r.opts.Attempted(code)
	}
	r.mu.Lock()
	r.state.LastHTTPStatus = code
	r.mu.Unlock()
	var id string
	switch {
	case resp.JSON201 != nil && resp.JSON201.Id != nil:
		id = *resp.JSON201.Id
	case resp.JSON200 != nil && resp.JSON200.Id != nil:
		id = *resp.JSON200.Id
	}
	switch {
	case code == http.StatusOK || code == http.StatusCreated:
		was := r.State()
		r.set(Registered, id, "")
		if was.Phase != Registered || was.ProviderID != id {
			r.log.Info("registered with the DCM registry", "registry", r.opts.RegistryURL, "provider_id", id, "status", code,
				"endpoint", r.Payload().Endpoint)
		}
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return fmt.Errorf("registry answered %d: %s", code, trim(resp.Body))
	default:
		return &permanentError{status: code, body: trim(resp.Body)}
	}
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
