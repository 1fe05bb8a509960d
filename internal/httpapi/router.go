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
	Store        Store
	Objects      container.Options
	Health       HealthCheck
	Registration func() registration.State // nil: not shown
	// Permissions describes the Kubernetes permissions the provider lacks ("" when
	// none): health is then unhealthy, saying so. Optional.
	Permissions func() string
	// APIToken returns the bearer token every request but health and readiness must
	// carry; nil: no authentication.
	APIToken       func() []byte
	Version        string
	RequestTimeout time.Duration
	// MaxInFlight caps the requests served at once (503 beyond); 0: no cap.
	MaxInFlight int
	Log         *slog.Logger
	// PodSecurity, when set, gives the pods' security profile in place of
	// Objects.PodSecurity: the provider may learn it only once started.
	PodSecurity func() container.PodSecurity
}

// NewHandler builds the whole HTTP stack:
// request id -> log/recover -> HEAD as GET -> authentication -> in-flight cap -> limits ->
// JSON body -> OpenAPI validation -> generated router -> handlers.
func NewHandler(o Options) (http.Handler, error) {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	h := &handlers{store: o.Store, objects: o.Objects, health: o.Health, registration: o.Registration, permissions: o.Permissions,
		version: o.Version, started: time.Now(), log: o.Log, podSecurity: o.PodSecurity}
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
	validated, err := withValidation(routed)
	if err != nil {
		return nil, err
	}
	return withRequestID(withLogAndRecover(o.Log, withHead(withAuth(o.APIToken,
		withInFlightLimit(o.MaxInFlight, withLimits(o.RequestTimeout, withJSONBody(validated))))))), nil
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
