package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// ProblemTypeBase prefixes every problem type: DCM's convention.
const ProblemTypeBase = "https://dcm-project.github.io/problems/"

// Problem codes (the last element of the type URI) and their titles. A type has one
// title (RFC 9457 §3.1.3), whatever the occurrence; the detail says what happened.
var titles = map[string]string{
	"invalid-argument":  "Invalid argument",
	"not-found":         "Not found",
	"already-exists":    "Already exists",
	"permission-denied": "Permission denied",
	"unauthenticated":   "Unauthenticated",
	"unavailable":       "Service Unavailable",
	"internal":          "Internal Server Error",
	// Outside DCM's codes: what the request asks of HTTP itself (RFC 9110's names).
	"method-not-allowed": "Method Not Allowed",
	"content-too-large":  "Content Too Large",
	// The provider's own: what a client can act on that DCM's codes do not name.
	"container-limit-reached": "Container limit reached", // 507: SP_MAX_CONTAINERS
	"being-deleted":           "Being deleted",           // 409: the id's previous container's DELETED is not delivered yet
	"idempotency-key-reused":  "Idempotency key reused",  // 422: the key came with another spec
}

// Fixed details of the contract.
const (
	multipleDetail = "multiple validation errors, see the errors array for details"
	internalDetail = "an unexpected error occurred"
)

// Problem is an error that knows how to answer the client.
type Problem struct {
	Status int
	Code   string // last element of the type URI; the title follows from it
	// Detail explains a problem that is not a list of violations.
	Detail string
	// Violations are what is wrong with the request, each located in it; written as
	// the detail and pointer (one) or the errors array (several), in contract order.
	Violations []container.Violation
	RetryAfter int   // seconds; set for 503
	Cause      error // logged, never sent
}

func (p *Problem) Error() string {
	msg := p.Code + ": " + p.Detail
	for _, v := range p.Violations {
		msg += "; " + v.Detail
	}
	if p.Cause != nil {
		msg += ": " + p.Cause.Error()
	}
	return msg
}

// invalid is a 400 for one or more violations.
func invalid(vs ...container.Violation) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: "invalid-argument", Violations: vs}
}

// badRequest is a 400 about the request as a whole (no field to point at).
func badRequest(detail string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: "invalid-argument", Detail: detail}
}

func notFound(detail string) *Problem {
	return &Problem{Status: http.StatusNotFound, Code: "not-found", Detail: detail}
}

func internal(cause error) *Problem {
	return &Problem{Status: http.StatusInternalServerError, Code: "internal", Cause: cause}
}

// maxDetail bounds one problem's detail, whatever it quotes (with MaxViolations, the
// whole answer is bounded).
const maxDetail = 1024

// body renders the problem as DCM reads it; instance is the request path.
func (p *Problem) body(instance string) v1alpha1.Problem {
	out := v1alpha1.Problem{
		Type: ProblemTypeBase + p.Code, Title: titles[p.Code], Status: p.Status, Instance: &instance,
	}
	vs, more := container.Capped(append([]container.Violation(nil), p.Violations...))
	switch {
	case p.Code == "internal":
		out.Detail = ptr(internalDetail)
	case len(vs) == 1:
		out.Detail = ptr(container.Clip(vs[0].Detail, maxDetail))
		if vs[0].Pointer != "" {
			out.Pointer = ptr(vs[0].Pointer)
		}
	case len(vs) > 1:
		out.Detail = ptr(multipleDetail)
		errs := make([]v1alpha1.ProblemError, len(vs))
		for i, v := range vs {
			errs[i].Detail = container.Clip(v.Detail, maxDetail)
			if v.Pointer != "" {
				errs[i].Pointer = ptr(v.Pointer)
			}
		}
		if more > 0 {
			// The answer stays small whatever the request: the first MaxViolations are
			// listed, the rest counted.
			errs = append(errs, v1alpha1.ProblemError{Detail: fmt.Sprintf("and %d more", more)})
		}
		out.Errors = &errs
	case p.Detail != "":
		out.Detail = ptr(p.Detail)
	}
	return out
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	// Not HTML-escaped: a detail says ">= 1" and "a & b", not "\u003e= 1" (the answer is
	// JSON for a client, never embedded in a page), and a quoted '<' costs 1 byte, not 6.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p.body(r.URL.Path))
}

func ptr[T any](v T) *T { return &v }
