package registration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	providerapi "github.com/dcm-project/service-provider-manager/api/v1alpha1/provider"
	providerclient "github.com/dcm-project/service-provider-manager/pkg/client/provider"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dcm-project/k8s-container-sp/internal/redact"
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
	Phase      Phase  `json:"status"`
	ProviderID string `json:"provider_id,omitempty"`
	// LastError is the last attempt's failure in a fixed text per Reason (Reason.Text):
	// health shows it to anyone, so it never carries the registry's host or answer;
	// the log has those.
	LastError  string    `json:"last_error,omitempty"`
	LastChange time.Time `json:"last_change"`
	// Reason classifies the last failure ("" after a success): a metric's label.
	Reason Reason `json:"-"`
	// LastHTTPStatus is the registry's last answer: 201 new, 200 known.
	LastHTTPStatus int `json:"-"`
}

// Reason is why the last registration attempt failed, one of a fixed set.
type Reason string

const (
	ReasonUnreachable Reason = "unreachable" // no answer: the name does not resolve, the connection is refused or cut
	ReasonTimeout     Reason = "timeout"     // no answer in time
	ReasonTLS         Reason = "tls"         // the TLS handshake with the registry failed (its certificate, say)
	ReasonUnavailable Reason = "unavailable" // the registry answered 408, 429 or 5xx: retried
	ReasonRejected    Reason = "rejected"    // the registry refused the registration (another 4xx): a configuration error
	ReasonUnexpected  Reason = "unexpected"  // any other answer
)

// Reasons are every Reason, for a metric's label values.
var Reasons = []Reason{ReasonUnreachable, ReasonTimeout, ReasonTLS, ReasonUnavailable, ReasonRejected, ReasonUnexpected}

// ReasonLabels are Reasons as strings.
func ReasonLabels() []string {
	out := make([]string, len(Reasons))
	for i, r := range Reasons {
		out[i] = string(r)
	}
	return out
}

// Text is the fixed text health shows for the reason.
func (r Reason) Text() string {
	switch r {
	case ReasonUnreachable:
		return "registry unreachable"
	case ReasonTimeout:
		return "registry did not answer in time"
	case ReasonTLS:
		return "TLS with the registry failed"
	case ReasonUnavailable:
		return "registry unavailable; retrying"
	case ReasonRejected:
		return "registration rejected by the registry"
	case ReasonUnexpected:
		return "unexpected answer from the registry"
	}
	return ""
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

func (r *Registrar) set(phase Phase, id string, reason Reason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.Phase != phase {
		r.state.LastChange = time.Now()
	}
	r.state.Phase, r.state.Reason, r.state.LastError = phase, reason, reason.Text()
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
			r.set(Rejected, "", perm.reason)
			r.log.Error("registration refused by the DCM registry: configuration error (not retried until later)",
				"registry", r.registry(), "status", perm.status, "answer", perm.body, "reason", perm.reason)
			return
		}
		reason := reasonOf(err)
		r.set(r.State().Phase, "", reason)
		delay := backoff.Step()
		r.log.Warn("registration failed; will retry", "registry", r.registry(), "attempt", attempt, "retry_in", delay.Round(time.Millisecond),
			"reason", reason, "err", redact.Text(err.Error(), r.opts.RegistryURL, r.opts.Endpoint))
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

// registry is the registry's URL fit for the log (redact.URL: no credentials).
func (r *Registrar) registry() string { return redact.URL(r.opts.RegistryURL) }

type permanentError struct {
	status int
	body   string
	reason Reason
}

// unavailableError is an answer that is retried (408, 429, 5xx).
type unavailableError struct {
	status int
	body   string
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("registry answered %d: %s", e.status, e.body)
}

// reasonOf classifies a failed attempt that is retried.
func reasonOf(err error) Reason {
	var ua *unavailableError
	var ne net.Error
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var alert tls.AlertError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &ua):
		return ReasonUnavailable
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alert), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalid):
		return ReasonTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	}
	return ReasonUnreachable
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
			r.log.Info("registered with the DCM registry", "registry", r.registry(), "provider_id", id, "status", code,
				"endpoint", redact.URL(r.Payload().Endpoint))
		}
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return &unavailableError{status: code, body: trim(resp.Body)}
	case code >= 400:
		return &permanentError{status: code, body: trim(resp.Body), reason: ReasonRejected}
	default:
		return &permanentError{status: code, body: trim(resp.Body), reason: ReasonUnexpected}
	}
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
