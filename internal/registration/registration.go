package registration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
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
	Rejected   Phase = "rejected"   // the registrar refused our payload (configuration error)
)

// The registrar is either an environment agent (today's DCM: registration moved out of
// its control plane into the agent) or DCM's older registry (service-provider-manager,
// at the control plane's URL): the same POST /providers and body, but the agent takes
// total_cpu only as a string ("200") and refuses a number (400), the older registry the
// other way round; at an agent a 409 means another provider (its embedded one, say)
// serves the service type, and a 422 is a semantic refusal. One client serves both: it
// sends the agent's form first and the answers say which registrar it met.

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
	ReasonUnreachable Reason = "unreachable"  // no answer: the name does not resolve, the connection is refused or cut
	ReasonTimeout     Reason = "timeout"      // no answer in time
	ReasonTLS         Reason = "tls"          // the TLS handshake with the registry failed (its certificate, say)
	ReasonUnavailable Reason = "unavailable"  // the registry answered 408, 429 or 5xx: retried
	ReasonRejected    Reason = "rejected"     // the registry refused the registration (another 4xx): a configuration error
	ReasonNoProviders Reason = "no-providers" // 404 at /providers: today's DCM registers providers through an environment agent
	ReasonConflict    Reason = "conflict"     // 409: another provider serves service type container there
	ReasonRefused     Reason = "refused"      // 422: the registrar refused the body (its reason is in the log)
	ReasonUnexpected  Reason = "unexpected"   // any other answer
)

// Reasons are every Reason, for a metric's label values.
var Reasons = []Reason{ReasonUnreachable, ReasonTimeout, ReasonTLS, ReasonUnavailable, ReasonRejected,
	ReasonNoProviders, ReasonConflict, ReasonRefused, ReasonUnexpected}

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
	case ReasonNoProviders:
		return "this DCM registers providers through an environment agent: set DCM_REGISTRATION_URL to http://<agent>:8080/api/v1alpha1"
	case ReasonConflict:
		return "another provider already serves service type container at this registrar (at an environment agent: leave container out of its embeddedSps)"
	case ReasonRefused:
		return "the registrar refused the registration body; the log has its reason"
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
	// APIToken: the provider's API requires a bearer token (SP_API_TOKEN_FILE). An
	// environment agent sends none, so once the registrar turns out to be one, a warning
	// says that every create and delete it forwards will be refused (401).
	APIToken bool
}

// Registrar keeps the provider registered.
type Registrar struct {
	opts   Options
	client *providerclient.Client
	log    *slog.Logger

	mu    sync.Mutex
	state State
	// cpuAsString: the form total_cpu is sent in first. It starts as a string (an
	// environment agent's, today's DCM) and turns to a number only when a registrar
	// refuses the string and takes the number (DCM's older registry); the form that
	// worked is kept for every later registration in the process.
	cpuAsString bool
	// agent: the registrar turned out to be an environment agent (warned once).
	agent bool
}

// New builds a registrar; nothing is sent before Run.
func New(opts Options, log *slog.Logger) (*Registrar, error) {
	if opts.RetryBase <= 0 {
		opts.RetryBase = time.Second
	}
	if opts.RetryCap <= 0 {
		opts.RetryCap = time.Minute
	}
	c, err := providerclient.NewClient(strings.TrimSuffix(opts.RegistryURL, "/"),
		providerclient.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		return nil, err
	}
	return &Registrar{opts: opts, client: c, log: log, cpuAsString: true, state: State{Phase: Pending, LastChange: time.Now()}}, nil
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
	// Capacity only when configured, in the registry client's types (an integer CPU
	// count); body() sends total_cpu as the string an environment agent takes ("200")
	// unless the registrar turned out to be the older registry (it refuses the string).
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

// body is the registration body as sent: Payload, with total_cpu a string when asString
// (an environment agent's form: "200").
func (r *Registrar) body(asString bool) ([]byte, error) {
	p := r.Payload()
	b, err := json.Marshal(p)
	if err != nil || !asString || p.Metadata == nil || p.Metadata.Resources == nil || p.Metadata.Resources.TotalCpu == nil {
		return b, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["metadata"].(map[string]any)["resources"].(map[string]any)["total_cpu"] = strconv.Itoa(*p.Metadata.Resources.TotalCpu)
	return json.Marshal(m)
}

// sendsCPU: the body carries total_cpu, whose form differs between the registrars.
func (r *Registrar) sendsCPU() bool { return r.opts.Capacity.TotalCPU > 0 }

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
			// Logged before the state shows it, so whoever sees Rejected finds the reason logged.
			r.log.Error("registration refused: "+perm.reason.Text()+" (a configuration error: tried again in 5 min)",
				"registry", r.registry(), "status", perm.status, "answer", perm.body, "registrar_reason", problemDetail(perm.body), "reason", perm.reason)
			r.set(Rejected, "", perm.reason)
			return
		}
		reason := reasonOf(err)
		r.set(r.State().Phase, "", reason)
		delay := backoff.Step()
		r.log.Warn("registration failed; will retry", "registry", r.registry(), "attempt", attempt, "retry_in", delay.Round(time.Millisecond).String(),
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
	r.mu.Lock()
	asString := r.cpuAsString
	r.mu.Unlock()
	err := r.post(ctx, asString)
	var perm *permanentError
	if !errors.As(err, &perm) || !r.sendsCPU() || !bodyRefused(perm.status) {
		return err
	}
	// Perhaps the other registrar: an environment agent refuses an integer total_cpu,
	// the older registry a string one. The other form is tried at once; when it is not
	// refused as a body too, it is the registrar's, and kept.
	err2 := r.post(ctx, !asString)
	var perm2 *permanentError
	if errors.As(err2, &perm2) && bodyRefused(perm2.status) {
		return err // both refused: the first answer says why
	}
	if err2 == nil || perm2 != nil {
		r.mu.Lock()
		r.cpuAsString = !asString
		r.mu.Unlock()
		r.log.Info("the registrar takes total_cpu as a "+map[bool]string{true: "string (an environment agent)", false: "number (DCM's older registry)"}[!asString],
			"registry", r.registry())
	}
	return err2
}

// bodyRefused: an answer refusing the registration's body (400 at the older registry
// and at an agent's schema check, 422 at an agent's semantic one).
func bodyRefused(code int) bool {
	return code == http.StatusBadRequest || code == http.StatusUnprocessableEntity
}

// post sends the registration once and reads the answer.
func (r *Registrar) post(ctx context.Context, cpuAsString bool) error {
	b, err := r.body(cpuAsString)
	if err != nil {
		return err
	}
	// The plain client, not the one that parses answers: a 404 from a control plane
	// that is not a registry, or any answer, may not be the JSON the registry's
	// OpenAPI promises, and it must still be read as the status it is.
	resp, err := r.client.CreateProviderWithBody(ctx, nil, "application/json", bytes.NewReader(b))
	if err != nil {
		if r.opts.Attempted != nil {
			r.opts.Attempted(0)
		}
		return err // transport: retry
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err // cut off: retry
	}
	code := resp.StatusCode
	if r.opts.Attempted != nil {
		r.opts.Attempted(code)
	}
	r.mu.Lock()
	r.state.LastHTTPStatus = code
	r.mu.Unlock()
	var created struct {
		ID   string `json:"id"`
		Type string `json:"type"` // an environment agent's: external (or embedded)
	}
	_ = json.Unmarshal(answer, &created)
	id := created.ID
	switch {
	case code == http.StatusOK || code == http.StatusCreated:
		// An environment agent: its answer names the provider's type, which the older
		// registry's does not, or it took total_cpu as a string, which that one refuses.
		agent := created.Type == "external" || created.Type == "embedded" || (cpuAsString && r.sendsCPU())
		// Logged before the state shows it, as a refusal is.
		if was := r.State(); was.Phase != Registered || was.ProviderID != id {
			r.log.Info("registered with DCM", "registry", r.registry(), "registrar", map[bool]string{true: "environment agent", false: "DCM registry"}[agent],
				"provider_id", id, "status", code, "endpoint", redact.URL(r.Payload().Endpoint))
		}
		if agent {
			r.foundAgent()
		}
		r.set(Registered, id, "")
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return &unavailableError{status: code, body: trim(answer)}
	case code >= 400:
		return &permanentError{status: code, body: trim(answer), reason: refusal(code)}
	default:
		return &permanentError{status: code, body: trim(answer), reason: ReasonUnexpected}
	}
}

// TokenWarning is what the log says when the API requires a token (SP_API_TOKEN_FILE)
// and the registrar is an environment agent.
const TokenWarning = "the registrar is an environment agent, which sends no Authorization header: with SP_API_TOKEN_FILE set, " +
	"every create and delete it forwards will be refused (401, final for the agent: not retried), while its health polls, " +
	"exempt from the token, keep the provider Ready there; to serve the agent, unset SP_API_TOKEN_FILE and restrict who reaches the API another way"

// foundAgent notes that the registrar is an environment agent, and warns once when the
// API requires a token the agent never sends.
func (r *Registrar) foundAgent() {
	r.mu.Lock()
	first := !r.agent
	r.agent = true
	r.mu.Unlock()
	if first && r.opts.APIToken {
		r.log.Warn(TokenWarning, "registry", r.registry())
	}
}

// Agent: the registrar turned out to be an environment agent (false until it answers).
func (r *Registrar) Agent() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agent
}

// refusal names a 4xx that is not retried for what it means at either registrar.
func refusal(code int) Reason {
	switch code {
	case http.StatusNotFound:
		// No /providers here: the control plane of today's DCM (it registers agents);
		// or a URL that is wrong some other way, which the same advice also fixes.
		return ReasonNoProviders
	case http.StatusConflict:
		return ReasonConflict
	case http.StatusUnprocessableEntity:
		return ReasonRefused
	}
	return ReasonRejected
}

// problemDetail is the registrar's reason in a problem+json answer (its detail, else
// its title); "" when the answer is no problem document.
func problemDetail(body string) string {
	var p struct{ Title, Detail string }
	if json.Unmarshal([]byte(body), &p) != nil {
		return ""
	}
	if p.Detail != "" {
		return p.Detail
	}
	return p.Title
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
