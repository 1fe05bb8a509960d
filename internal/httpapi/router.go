package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
)

// Options wire the HTTP layer to the rest of the provider.
type Options struct {
	Store   Store
	Objects container.Options
	// Policy is what the operator lets a tenant's spec ask for (container.Policy).
	Policy       container.Policy
	Health       HealthCheck
	Registration func() registration.State // nil: not shown
	// Events reports the status event channel: NATS connected, and how many containers'
	// statuses are owed. Shown in health, never unhealthy: a provider that cannot
	// publish still serves, and delivers what it owes once NATS is back. nil: not shown.
	Events func() (connected bool, undelivered int)
	// Permissions describes the Kubernetes permissions the provider lacks ("" when
	// none): health is then unhealthy, saying so. Optional.
	Permissions func() string
	// APIToken returns the bearer token every request but health and readiness must
	// carry; nil: no authentication.
	APIToken       func() []byte
	Version        string
	RequestTimeout time.Duration
	// MaxInFlight caps the requests served at once (503 beyond); 0: no cap. A request
	// with a body takes its slot once the body is read (see MaxBodyReads).
	MaxInFlight int
	// MaxBodyReads caps the request bodies being read at once (503 beyond); 0:
	// DefaultMaxBodyReads.
	MaxBodyReads int
	// MaxContainerBytes is the per-container limit (SP_CONTAINER_MAX_BYTES): a create
	// whose Kubernetes objects would be larger is refused (400); the request body limit
	// follows from it. 0: container.DefaultMaxObjectBytes.
	MaxContainerBytes int
	// MaxContainers and Containers: a create is refused (507) once Containers() (this
	// replica's count) is MaxContainers or more. 0 or nil: no limit.
	MaxContainers int
	Containers    func() int
	Log           *slog.Logger
	// PodSecurity, when set, gives the pods' security profile in place of
	// Objects.PodSecurity: the provider may learn it only once started.
	PodSecurity func() container.PodSecurity
	// Images resolves each create's image, waiting at most ImageTimeout (default 5 s);
	// nil: the pod names the reference as sent.
	Images       Resolver
	ImageTimeout time.Duration
}

// NewHandler builds the whole HTTP stack:
// request id -> log/recover -> HEAD as GET -> authentication -> limits -> JSON body (read
// whole, bounded) -> in-flight cap -> OpenAPI validation -> generated router -> handlers.
func NewHandler(o Options) (http.Handler, error) {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.MaxContainerBytes <= 0 {
		o.MaxContainerBytes = container.DefaultMaxObjectBytes
	}
	if o.ImageTimeout <= 0 {
		o.ImageTimeout = 5 * time.Second
	}
	maxBody := int64(o.MaxContainerBytes) + bodySlack
	h := &handlers{store: quotaLogged{o.Store, o.Log}, objects: o.Objects, policy: o.Policy, health: o.Health, registration: o.Registration, events: o.Events, permissions: o.Permissions,
		version: o.Version, started: time.Now(), log: o.Log, podSecurity: o.PodSecurity,
		maxContainerBytes: o.MaxContainerBytes, maxContainers: o.MaxContainers, containers: o.Containers,
		images: o.Images, imageTimeout: o.ImageTimeout}
	strict := v1alpha1.NewStrictHandlerWithOptions(h, nil, v1alpha1.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeProblem(w, r, bodyProblem(err))
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			var p *Problem
			if !errors.As(err, &p) {
				p = internal(err)
			}
			if p.Status >= 500 {
				o.Log.Error("request failed", "request_id", RequestID(r.Context()), "status", p.Status, "err", err)
			}
			writeProblem(w, r, p)
		},
	})
	mux := http.NewServeMux()
	routed := v1alpha1.HandlerWithOptions(strict, v1alpha1.StdHTTPServerOptions{
		BaseRouter: mux,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeProblem(w, r, badRequest(err.Error()))
		},
	})
	validated, err := withValidation(routed, o.Policy)
	if err != nil {
		return nil, err
	}
	return withRequestID(withLogAndRecover(o.Log, withHead(withAuth(o.APIToken,
		withLimits(o.RequestTimeout, maxBody, withJSONBody(o.MaxBodyReads, maxBody,
			withInFlightLimit(o.MaxInFlight, validated))))))), nil
}

// bodyProblem explains a body that could not be decoded. Size and JSON syntax were
// checked before (withLimits, withJSONBody); what is left is a value the schema allows
// but Go's types do not (e.g. 1e3 for an int32).
func bodyProblem(err error) *Problem {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return invalid(container.Violation{Detail: fmt.Sprintf("%s must be %s, not %s", typ.Field, typ.Type, typ.Value)})
	}
	return badRequest("the request body could not be decoded as a container")
}
