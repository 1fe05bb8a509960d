// Package httpapi is the HTTP layer: router, middleware, problem+json and handlers. It
// only translates between HTTP and the container domain and store; every error it
// writes, whatever raised it, is an RFC 9457 problem with DCM's type URIs.
package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// ProblemTypeBase prefixes every problem type: DCM's convention.
const ProblemTypeBase = "https://dcm-project.github.io/problems/"

// Problem is an error that knows how to answer the client.
type Problem struct {
	Status     int
	Code       string // last element of the type URI
	Title      string
	Detail     string
	Errors     []container.Violation
	RetryAfter int   // seconds; set for 503
	Cause      error // logged, never sent
}

func (p *Problem) Error() string {
	if p.Cause != nil {
		return p.Title + ": " + p.Detail + ": " + p.Cause.Error()
	}
	return p.Title + ": " + p.Detail
}

func invalid(detail string, vs ...container.Violation) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: "invalid-argument", Title: "Invalid request", Detail: detail, Errors: vs}
}

func notFound(detail string) *Problem {
	return &Problem{Status: http.StatusNotFound, Code: "not-found", Title: "Not found", Detail: detail}
}

func internal(cause error) *Problem {
	return &Problem{Status: http.StatusInternalServerError, Code: "internal", Title: "Internal error",
		Detail: "The provider could not complete the request; see its log.", Cause: cause}
}

// writeProblem writes p as application/problem+json. The instance is the request path.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	body := v1alpha1.Problem{
		Type:     ProblemTypeBase + p.Code,
		Title:    p.Title,
		Status:   p.Status,
		Instance: ptr(r.URL.Path),
	}
	if p.Detail != "" {
		body.Detail = ptr(p.Detail)
	}
	if len(p.Errors) > 0 {
		body.Errors = &p.Errors
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}

func ptr[T any](v T) *T { return &v }
