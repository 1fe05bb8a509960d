// Package kubeerr says what a failed call to the Kubernetes API means to the provider's
// client: each client-go error becomes an *Error of a Kind the HTTP layer maps to a
// status code and problem type, with a message safe to show a client (a quota's usage,
// an admission policy's name and the apiserver's field paths translated or left out)
// and the original kept for the log.
package kubeerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Kind says what went wrong in terms a client can act on; the HTTP layer maps it to a
// status code.
type Kind int

const (
	KindInternal    Kind = iota // our fault or the cluster's set-up (RBAC, namespace)
	KindNotFound                // no container with that id
	KindConflict                // the id is taken
	KindInvalid                 // the cluster refused the request's content
	KindQuota                   // a ResourceQuota refused it
	KindUnavailable             // the apiserver is unreachable, overloaded or timed out
	KindPermission              // RBAC refused the provider (its Role lacks something)
	KindDeleting                // the id's previous container is being deleted: retry later
	KindKeyReused               // the Idempotency-Key was used by a create with another spec
)

// Error is a classified failure. Message is safe to show a client; Err is for the log.
type Error struct {
	Kind    Kind
	Message string
	Fields  []container.Violation
	// RetryAfter, when set, is how long (seconds) a client should wait before trying
	// again, and Message is then the whole answer it is given.
	RetryAfter int
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Classify turns a client-go error into an *Error (an *Error is returned as it is).
// what names the operation for the log.
func Classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	wrap := func(k Kind, msg string) *Error {
		return &Error{Kind: k, Message: msg, Err: fmt.Errorf("%s: %w", what, err)}
	}
	switch {
	case isAdmissionDenial(err):
		// Before the status codes: a webhook chooses its own (403 by default, 400, 422),
		// and a 403 from it is no RBAC refusal (asking the apiserver what the provider
		// may do would find nothing missing, and a retry is refused again).
		// It is the client's to read, as DCM's invalid-argument (400) against spec: the
		// same request is refused again.
		e := wrap(KindInvalid, "the cluster's admission policy refused the container")
		e.Fields = []container.Violation{{Pointer: container.Pointer("spec"),
			Detail: "the cluster's admission policy refused it: " + apiMessage(err)}}
		return e
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		e := wrap(KindInvalid, "the cluster refused the container")
		e.Fields = fieldsFromStatus(err)
		return e
	case apierrors.IsRequestEntityTooLargeError(err) || strings.Contains(err.Error(), "request is too large"):
		// The apiserver's own limit (3 MiB) or etcd's (1.5 MiB): the container is too big
		// for the cluster. Validation refuses long before (SP_CONTAINER_MAX_BYTES), so
		// this is a cluster with smaller limits.
		e := wrap(KindInvalid, "the container is too large for the cluster")
		e.Fields = []container.Violation{{Pointer: container.Pointer("spec"),
			Detail: "the cluster refused the container as too large: " + apiMessage(err)}}
		return e
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		// The quota's message is the namespace's usage across every tenant (used: and
		// limited: figures) and the quota's name: the client is told which resource
		// ran out, in fixed words; the message goes to the log (Err).
		e := wrap(KindQuota, "a resource quota refused the container")
		e.Fields = []container.Violation{{Pointer: container.Pointer("spec", "resources"),
			Detail: "resources: " + QuotaText(apiMessage(err))}}
		return e
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) || isNetworkError(err):
		return wrap(KindUnavailable, UnavailableMessage)
	case apierrors.IsInternalError(err):
		// The apiserver failed (e.g. right after a restart, its ClusterIP allocator not
		// loaded yet answers "range is full"): a retry later is the client's way out.
		return wrap(KindUnavailable, "the Kubernetes API failed")
	case apierrors.IsForbidden(err):
		return wrap(KindPermission, "the provider is not allowed to do this in its namespace (check its RBAC)")
	}
	return wrap(KindInternal, "unexpected error from the Kubernetes API")
}

// QuotaText is what a client is told of a ResourceQuota's refusal, whose message (the
// apiserver's quota admission: `exceeded quota: <name>, requested: <resource>=<n>,...,
// used: ..., limited: ...`) names the quota and shows every tenant's usage: a fixed
// text naming only the resources exceeded (as Kubernetes names them, at most
// maxQuotaResources), without the quota's name or any figure.
func QuotaText(msg string) string {
	const text = "the containers' namespace quota does not allow this container"
	_, rest, ok := strings.Cut(msg, "exceeded quota: ")
	if !ok {
		return text
	}
	_, requested, ok := strings.Cut(rest, ", requested: ")
	if !ok {
		return text
	}
	requested, _, _ = strings.Cut(requested, ", used: ")
	var names []string
	for _, item := range strings.Split(requested, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(item), "=")
		if !quotaResource.MatchString(name) || slices.Contains(names, name) {
			continue
		}
		if len(names) == maxQuotaResources {
			names = append(names, "…")
			break
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return text
	}
	return text + " (" + strings.Join(names, ", ") + ")"
}

// quotaResource is a resource name a quota can hold (limits.memory, services.nodeports,
// count/deployments.apps, requests.example.com/gpu), and nothing else.
var quotaResource = regexp.MustCompile(`^[a-z0-9]([a-z0-9./_-]{0,120}[a-z0-9])?$`)

const maxQuotaResources = 8

// UnavailableMessage is the message of a call to the Kubernetes API that failed (an
// outage, a timeout, throttling): the HTTP layer words it for the client.
const UnavailableMessage = "the Kubernetes API is unavailable"

// isAdmissionDenial tells a refusal by an admission webhook or a
// ValidatingAdmissionPolicy from any other: the apiserver words them so
// (k8s.io/apiserver's webhook errors.ToStatusErr: `admission webhook "name" denied the
// request: ...`; the policy plugin: `ValidatingAdmissionPolicy 'name' with binding
// 'binding' denied request: ...`), whatever status code the policy chose.
func isAdmissionDenial(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	s := st.Status()
	if s.Code < 400 || s.Code >= 500 {
		return false
	}
	msg := s.Message
	return strings.Contains(msg, "admission webhook ") && strings.Contains(msg, " denied the request") ||
		strings.Contains(msg, "ValidatingAdmissionPolicy ") && strings.Contains(msg, " denied request")
}

func isNetworkError(err error) bool {
	var ue *url.Error
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || (errors.As(err, &ue) && ue.Err != nil) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

func apiMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Message
	}
	return err.Error()
}

// kubeToSpec maps where the apiserver found a problem to the request field it came from
// (its name in DCM's dotted form, and its pointer).
var kubeToSpec = []struct{ kube, field, pointer string }{
	{"spec.template.spec.containers[0].image", "image.reference", "#/spec/image/reference"},
	{"spec.template.spec.containers[0].env", "process.env", "#/spec/process/env"},
	{"spec.template.spec.containers[0].command", "process.command", "#/spec/process/command"},
	{"spec.template.spec.containers[0].args", "process.args", "#/spec/process/args"},
	{"spec.template.spec.containers[0].resources", "resources", "#/spec/resources"},
	{"spec.template.spec.containers[0].ports", "network.ports", "#/spec/network/ports"},
	{"spec.template.spec.containers[0].name", "metadata.name", "#/spec/metadata/name"},
	{"spec.template.metadata.labels", "metadata.labels", "#/spec/metadata/labels"},
	{"metadata.labels", "metadata.labels", "#/spec/metadata/labels"},
	{"metadata.generateName", "metadata.name", "#/spec/metadata/name"},
	{"metadata.name", "metadata.name", "#/spec/metadata/name"},
	{"spec.ports", "network.ports", "#/spec/network/ports"},
}

// fieldsFromStatus lists the apiserver's field causes, named as request fields where the
// mapping is known, with the Kubernetes path in the detail either way.
func fieldsFromStatus(err error) []container.Violation {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) == 0 {
		return []container.Violation{{Pointer: container.Pointer("spec"), Detail: "the cluster refused the container: " + apiMessage(err)}}
	}
	var out []container.Violation
	for _, c := range st.Status().Details.Causes {
		v := container.Violation{Pointer: container.Pointer("spec"), Detail: "spec: " + c.Message}
		for _, m := range kubeToSpec {
			if strings.HasPrefix(c.Field, m.kube) {
				v = container.Violation{Pointer: m.pointer, Detail: m.field + ": " + c.Message}
				break
			}
		}
		if c.Field != "" {
			v.Detail += fmt.Sprintf(" (Kubernetes field %s)", c.Field)
		}
		out = append(out, v)
	}
	return out
}
