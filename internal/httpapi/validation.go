package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	middleware "github.com/oapi-codegen/nethttp-middleware"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// withValidation checks every request against openapi.yaml (kin-openapi) before it
// reaches a handler, and answers routing and validation failures as problems.
func withValidation(next http.Handler) (http.Handler, error) {
	spec, err := v1alpha1.GetSpec()
	if err != nil {
		return nil, err
	}
	spec.Servers = nil // match any host
	mw := middleware.OapiRequestValidatorWithOptions(spec, &middleware.Options{
		SilenceServersWarning: true,
		Options: openapi3filter.Options{
			MultiError:         true,
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		},
		ErrorHandlerWithOpts: validationProblem,
	})
	return mw(next), nil
}

func validationProblem(_ context.Context, err error, w http.ResponseWriter, r *http.Request, opts middleware.ErrorHandlerOpts) {
	// A body too large or not JSON never gets here: withJSONBody answered it.
	switch {
	case errors.Is(err, routers.ErrMethodNotAllowed):
		w.Header().Set("Allow", allowed(r))
		writeProblem(w, r, &Problem{Status: http.StatusMethodNotAllowed, Code: "invalid-argument",
			Detail: fmt.Sprintf("method %s is not supported on %s", r.Method, r.URL.Path)})
		return
	case opts.MatchedRoute == nil:
		writeProblem(w, r, notFound(fmt.Sprintf("no such endpoint: %s", r.URL.Path)))
		return
	case opts.StatusCode >= 500:
		writeProblem(w, r, internal(err))
		return
	}
	vs := violations(err)
	// Structural problems stop decoding, but a body that still decodes can be checked
	// for its semantic problems too, so the client learns all of them in one answer.
	if op := opts.MatchedRoute.Route.Operation; op != nil && op.OperationID == "CreateContainer" && r.Body != nil {
		var c struct {
			Spec *v1alpha1.ContainerSpec `json:"spec"`
		}
		var domain []container.Violation
		if q := r.URL.Query(); q.Has("id") {
			domain = container.ValidateID("id", q.Get("id"))
		}
		if json.NewDecoder(r.Body).Decode(&c) == nil && c.Spec != nil {
			domain = append(domain, container.Validate(c.Spec)...)
		}
		vs = mergeViolations(vs, domain)
	}
	writeProblem(w, r, invalid(vs...))
}

// violations flattens kin-openapi's errors: parameters by name (no pointer), body
// fields by their JSON pointer, each detail naming the field in dotted form.
func violations(err error) []container.Violation {
	var out []container.Violation
	var walk func(param string, err error)
	walk = func(param string, err error) {
		switch e := err.(type) {
		case openapi3.MultiError:
			for _, inner := range e {
				walk(param, inner)
			}
		case *openapi3filter.RequestError:
			if e.Parameter != nil {
				param = e.Parameter.Name
			}
			switch e.Err.(type) {
			case openapi3.MultiError, *openapi3.SchemaError:
				walk(param, e.Err)
			default:
				out = append(out, container.Violation{Param: param, Detail: orBody(param) + ": " + requestReason(e)})
			}
		case *openapi3.SchemaError:
			// A oneOf failure explains itself through its alternatives' errors.
			if inner, ok := errors.Unwrap(e.Origin).(openapi3.MultiError); ok && e.Origin != nil {
				walk(param, inner)
				return
			}
			if param != "" {
				out = append(out, container.Violation{Param: param, Detail: param + ": " + e.Reason})
				return
			}
			segs := e.JSONPointer()
			if len(segs) == 0 {
				out = append(out, container.Violation{Detail: "request body: " + e.Reason})
				return
			}
			out = append(out, container.Violation{Pointer: container.Pointer(segs...), Detail: dotted(segs) + ": " + e.Reason})
		default:
			out = append(out, container.Violation{Param: param, Detail: orBody(param) + ": " + err.Error()})
		}
	}
	walk("", err)
	return out
}

// requestReason explains a request error that is not about one schema field.
func requestReason(e *openapi3filter.RequestError) string {
	switch {
	case e.Err == nil:
		return e.Reason
	case e.Reason == "":
		return e.Err.Error()
	}
	return e.Reason + ": " + e.Err.Error()
}

// dotted names a body field the way DCM does: relative to spec, indexes in brackets
// (network.ports[1].visibility); fields outside spec keep their full path.
func dotted(segments []string) string {
	if len(segments) > 1 && segments[0] == "spec" {
		segments = segments[1:]
	}
	var b strings.Builder
	for _, s := range segments {
		if _, err := strconv.Atoi(s); err == nil {
			b.WriteString("[" + s + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

func orBody(param string) string {
	if param == "" {
		return "request body"
	}
	return param
}

// mergeViolations adds the domain's violations; where both are about the same field or
// parameter the domain's detail wins, being the more specific ("cpu.min (3) must not
// exceed cpu.max (2)" rather than "doesn't match any schema from oneOf").
func mergeViolations(schema, domain []container.Violation) []container.Violation {
	key := func(v container.Violation) string {
		if v.Pointer != "" {
			return v.Pointer
		}
		if v.Param != "" {
			return "?" + v.Param
		}
		return ""
	}
	covered := map[string]bool{}
	for _, v := range domain {
		covered[key(v)] = true
	}
	out := make([]container.Violation, 0, len(schema)+len(domain))
	for _, v := range schema {
		if k := key(v); k == "" || !covered[k] {
			out = append(out, v)
		}
	}
	return append(out, domain...)
}

func allowed(r *http.Request) string {
	if strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/containers") {
		return "GET, POST"
	}
	if strings.HasSuffix(r.URL.Path, "/health") {
		return "GET"
	}
	return "GET, DELETE"
}
