package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
)

// Store is what the handlers need from the cluster (internal/store implements it).
type Store interface {
	Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error)
	Get(ctx context.Context, id string) (container.Observed, error)
	List(after string, limit int) ([]container.Observed, bool, error)
	Delete(ctx context.Context, id string) error
}

// HealthCheck reports whether the Kubernetes API is reachable.
type HealthCheck func(ctx context.Context) error

const (
	defaultPageSize = 50
	maxPageSize     = 1000
	// maxPageBytes bounds a LIST page's encoded containers: a page ends before the
	// container that would take it past this, with next_page_token as when it is full
	// (at least one container per page, whatever its size). 1,000 typical containers
	// are ~1.2 MB, so only pages of large containers are cut (a page of 1,000 at the
	// largest allowed size would be ~10 MB; before the per-container limit, 39 MB).
	maxPageBytes = 4 << 20
	// listRun is how many containers a LIST reads from the store at once: the page is
	// written as it is read, so a request holds a run of views and one container's
	// JSON, not its whole page.
	listRun    = 100
	healthType = "k8s-container-service-provider.dcm.io/health"
)

// handlers implements the generated strict server interface.
type handlers struct {
	store        Store
	objects      container.Options
	policy       container.Policy
	podSecurity  func() container.PodSecurity // nil: objects.PodSecurity
	health       HealthCheck
	registration func() registration.State
	events       func() (bool, int)
	permissions  func() string
	version      string
	started      time.Time
	log          *slog.Logger
	// maxContainerBytes bounds one container's objects; maxContainers (0: none) the
	// number of containers, as containers() counts them.
	maxContainerBytes int
	maxContainers     int
	containers        func() int
	// images resolves each create's image (nil: the pod names the reference as sent),
	// waiting at most imageTimeout.
	images       Resolver
	imageTimeout time.Duration
}

var _ v1alpha1.StrictServerInterface = (*handlers)(nil)

func (h *handlers) CreateContainer(ctx context.Context, req v1alpha1.CreateContainerRequestObject) (v1alpha1.CreateContainerResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("the request body must be a JSON object with a spec")
	}
	var vs []container.Violation
	var key string
	if k := req.Params.IdempotencyKey; k != nil {
		var kv []container.Violation
		key, kv = container.IdempotencyKey(*k)
		vs = append(vs, kv...)
	}
	// The id: the client's; else one the key names (every retry of the request finds
	// what the first made); else a new one.
	id := uuid.NewString()
	switch {
	case req.Params.Id != nil:
		id = *req.Params.Id
		vs = append(vs, container.ValidateID("id", id)...)
	case key != "":
		id = container.IDForKey(key)
	}
	vs = append(vs, container.Validate(&req.Body.Spec, h.policy)...)
	if len(vs) > 0 {
		return nil, invalid(vs...)
	}
	opts := h.objects
	if h.podSecurity != nil {
		opts.PodSecurity = h.podSecurity()
	}
	objs, err := container.Build(id, &req.Body.Spec, opts)
	if err != nil {
		return nil, internal(err)
	}
	digest, p := h.resolveImage(ctx, objs.Deployment, req.Body.Spec.Image.Reference)
	if p != nil {
		return nil, p
	}
	if vs := container.CheckSize(objs, h.maxContainerBytes); len(vs) > 0 {
		return nil, invalid(vs...)
	}
	if key != "" {
		objs.Request = container.Request{Key: key, Digest: container.RequestDigest(&req.Body.Spec)}
	}
	if p := h.full(); p != nil {
		return nil, p
	}
	obs, err := h.store.Create(ctx, id, objs)
	if err != nil {
		return nil, fromStore(err, id)
	}
	out := container.ToAPI(obs)
	// The response echoes the spec as sent (visibility per port included); GET infers
	// visibility from the Service, as the design says. The endpoints are what the
	// apiserver's answer holds (the cluster IP is allocated by then, a load balancer's
	// ingress not yet), as GET reads them: the validator refused a body that sent any.
	endpoints := out.Spec.Endpoints
	out.Spec = req.Body.Spec
	if digest != "" {
		out.Spec.Image.Digest = &digest
	}
	out.Spec.Metadata.Namespace = ptr(obs.Deployment.Namespace)
	out.Spec.Endpoints = endpoints
	if n := out.Spec.Network; n != nil {
		// What will really be exposed (an internal port beside an external one is
		// external too: SP_K8S_MIXED_VISIBILITY=expose), as GET will say.
		net := *n
		net.Ip = nil
		if n.Ports != nil {
			ports := make([]v1alpha1.ContainerPort, len(*n.Ports))
			for i, p := range *n.Ports {
				ports[i] = p
				ports[i].Visibility = container.Visibility(&req.Body.Spec, p)
			}
			net.Ports = &ports
		}
		out.Spec.Network = &net
	}
	return v1alpha1.CreateContainer201JSONResponse(out), nil
}

// full refuses a create once the provider holds maxContainers: the bound on its memory
// (see container.DefaultMaxContainers). The count is this replica's caches' (every id
// with a Deployment or a record, creates in progress and containers being deleted
// included), so replicas that take creates at the same moment can overshoot the limit
// by at most the number of creates in flight on the others, which their caches have
// not seen yet.
func (h *handlers) full() *Problem {
	if h.maxContainers <= 0 || h.containers == nil {
		return nil
	}
	if n := h.containers(); n >= h.maxContainers {
		return &Problem{Status: http.StatusInsufficientStorage, Code: "container-limit-reached",
			Detail: fmt.Sprintf("the provider holds %d containers, its limit (SP_MAX_CONTAINERS) is %d; delete one or raise the limit", n, h.maxContainers)}
	}
	return nil
}

func (h *handlers) GetContainer(ctx context.Context, req v1alpha1.GetContainerRequestObject) (v1alpha1.GetContainerResponseObject, error) {
	obs, err := h.store.Get(ctx, req.ContainerId)
	if err != nil {
		return nil, fromStore(err, req.ContainerId)
	}
	return v1alpha1.GetContainer200JSONResponse(container.ToAPI(obs)), nil
}

func (h *handlers) ListContainers(_ context.Context, req v1alpha1.ListContainersRequestObject) (v1alpha1.ListContainersResponseObject, error) {
	// AEP-158: 0 (or none) is the default, a size above the maximum is the maximum.
	size := defaultPageSize
	if p := req.Params.MaxPageSize; p != nil {
		if *p < 0 { // openapi.yaml refuses it first
			return nil, invalid(container.Violation{Detail: fmt.Sprintf("max_page_size %d is negative: use 0 (the default, %d) to %d", *p, defaultPageSize, maxPageSize)})
		}
		if *p > 0 {
			size = min(int(*p), maxPageSize)
		}
	}
	after := ""
	if t := req.Params.PageToken; t != nil && *t != "" {
		var ok bool
		if after, ok = decodePageToken(*t); !ok {
			return nil, invalid(container.Violation{Detail: "page_token is not a page token from this API"})
		}
	}
	// The first run is read before the answer starts, so that an error is a problem.
	first, more, err := h.store.List(after, min(size, listRun))
	if err != nil {
		return nil, fromStore(err, "")
	}
	return &listPage{store: h.store, size: size, maxBytes: maxPageBytes, first: first, more: more, log: h.log}, nil
}

func (h *handlers) DeleteContainer(ctx context.Context, req v1alpha1.DeleteContainerRequestObject) (v1alpha1.DeleteContainerResponseObject, error) {
	if err := h.store.Delete(ctx, req.ContainerId); err != nil {
		return nil, fromStore(err, req.ContainerId)
	}
	return v1alpha1.DeleteContainer204Response{}, nil
}

func (h *handlers) GetHealth(ctx context.Context, _ v1alpha1.GetHealthRequestObject) (v1alpha1.GetHealthResponseObject, error) {
	return v1alpha1.GetHealth200JSONResponse(h.healthBody(ctx)), nil
}

func (h *handlers) GetRootHealth(ctx context.Context, _ v1alpha1.GetRootHealthRequestObject) (v1alpha1.GetRootHealthResponseObject, error) {
	return v1alpha1.GetRootHealth200JSONResponse(h.healthBody(ctx)), nil
}

func (h *handlers) healthBody(ctx context.Context) v1alpha1.Health {
	status := v1alpha1.Healthy
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	// The check reads the last background probe (which logs outages once); a poll logs
	// nothing, however many arrive.
	if h.health(ctx) != nil {
		status = v1alpha1.Unhealthy
	}
	out := v1alpha1.Health{
		Type: healthType, Status: status, Path: "health", Version: h.version,
		Uptime: int64(time.Since(h.started).Seconds()),
	}
	if h.registration != nil {
		out.Registration = registrationBody(h.registration())
	}
	if h.events != nil {
		connected, undelivered := h.events()
		out.Events = &v1alpha1.EventsState{Connected: connected, Undelivered: int64(undelivered)}
	}
	if h.permissions != nil {
		if msg := h.permissions(); msg != "" {
			out.Status, out.Message = v1alpha1.Unhealthy, &msg
		}
	}
	return out
}

// registrationBody shows the registration state in the health answer.
func registrationBody(st registration.State) *v1alpha1.RegistrationState {
	out := &v1alpha1.RegistrationState{Status: v1alpha1.RegistrationStateStatus(st.Phase)}
	if st.ProviderID != "" {
		out.ProviderId = &st.ProviderID
	}
	if st.LastError != "" {
		out.LastError = &st.LastError
	}
	return out
}

// fromStore turns a store error into the answer a client can act on.
func fromStore(err error, id string) *Problem {
	var se *kubeerr.Error
	if !errors.As(err, &se) {
		return internal(err)
	}
	switch se.Kind {
	case kubeerr.KindNotFound:
		return notFound(fmt.Sprintf("no container has id %q", id))
	case kubeerr.KindConflict:
		if se.RetryAfter > 0 { // busy for a while (a create in progress): the store says why and when to come back
			return &Problem{Status: http.StatusConflict, Code: "already-exists", Detail: se.Message, RetryAfter: se.RetryAfter, Cause: err}
		}
		return &Problem{Status: http.StatusConflict, Code: "already-exists",
			Detail: fmt.Sprintf("a container with id %q already exists; it was not changed", id)}
	case kubeerr.KindDeleting:
		// Not "already exists": GET says 404, and the id is free once the previous
		// container's DELETED is delivered.
		return &Problem{Status: http.StatusConflict, Code: "being-deleted", Detail: se.Message, RetryAfter: se.RetryAfter, Cause: err}
	case kubeerr.KindKeyReused:
		return &Problem{Status: http.StatusUnprocessableEntity, Code: "idempotency-key-reused", Detail: se.Message}
	case kubeerr.KindInvalid:
		if len(se.Fields) == 0 {
			return badRequest("the cluster refused the container; nothing was created")
		}
		return invalid(se.Fields...)
	case kubeerr.KindQuota:
		return &Problem{Status: http.StatusForbidden, Code: "permission-denied", Violations: se.Fields}
	case kubeerr.KindPermission:
		// The provider's set-up, not the client: say what is missing (the store names
		// the permissions), and that it may work later, once the Role is fixed.
		return &Problem{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Detail: se.Message, RetryAfter: 30, Cause: err}
	case kubeerr.KindUnavailable:
		// The store says what happened (a cache behind, a miss it could not confirm, its
		// own limiter) and, when it knows, when to come back; the Kubernetes API is
		// blamed only when a call to it failed.
		p := &Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: se.Message, RetryAfter: se.RetryAfter, Cause: err}
		if p.RetryAfter == 0 {
			p.RetryAfter = 5
		}
		if se.Message == "" || se.Message == kubeerr.UnavailableMessage {
			p.Detail = "the Kubernetes API is unavailable; retry later"
		}
		return p
	}
	return internal(err)
}
