package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
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
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeProblem(w, r, tooLarge())
		return
	case errors.Is(err, routers.ErrMethodNotAllowed):
		w.Header().Set("Allow", allowed(r))
		writeProblem(w, r, &Problem{Status: http.StatusMethodNotAllowed, Code: "invalid-argument", Title: "Method not allowed",
			Detail: fmt.Sprintf("%s is not supported on %s.", r.Method, r.URL.Path)})
		return
	case opts.MatchedRoute == nil:
		writeProblem(w, r, notFound(fmt.Sprintf("No such endpoint: %s.", r.URL.Path)))
		return
	case opts.StatusCode >= 500:
		writeProblem(w, r, internal(err))
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.ContentLength != 0 && mt != "" && mt != "application/json" {
		writeProblem(w, r, &Problem{Status: http.StatusUnsupportedMediaType, Code: "invalid-argument",
			Title: "Unsupported media type", Detail: "Send the body as application/json."})
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
	writeProblem(w, r, invalid(fmt.Sprintf("The request has %d problem(s); nothing was changed.", len(vs)), vs...))
}

// violations flattens kin-openapi's errors into field/message pairs: parameters by
// name, body fields by their JSON path (spec.resources.cpu.min).
func violations(err error) []container.Violation {
	var out []container.Violation
	var walk func(field string, err error)
	walk = func(field string, err error) {
		switch e := err.(type) {
		case openapi3.MultiError:
			for _, inner := range e {
				walk(field, inner)
			}
		case *openapi3filter.RequestError:
			if e.Parameter != nil {
				field = e.Parameter.Name
			}
			if e.Err == nil {
				out = append(out, container.Violation{Field: orBody(field), Message: e.Error()})
				return
			}
			switch e.Err.(type) {
			case openapi3.MultiError, *openapi3.SchemaError:
				walk(field, e.Err)
			default:
				out = append(out, container.Violation{Field: orBody(field), Message: e.Reason + ": " + e.Err.Error()})
			}
		case *openapi3.SchemaError:
			// A oneOf failure explains itself through its alternatives' errors.
			if inner, ok := errors.Unwrap(e.Origin).(openapi3.MultiError); ok && e.Origin != nil {
				walk(field, inner)
				return
			}
			if p := fieldPath(e.JSONPointer()); p != "" {
				field = p
			}
			out = append(out, container.Violation{Field: orBody(field), Message: e.Reason})
		default:
			out = append(out, container.Violation{Field: orBody(field), Message: err.Error()})
		}
	}
	walk("", err)
	return out
}

// fieldPath writes a JSON pointer the way the domain names fields:
// spec.network.ports[1].visibility.
func fieldPath(segments []string) string {
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

func orBody(field string) string {
	if field == "" {
		return "body"
	}
	return field
}

// mergeViolations adds the domain's violations; where both name the same field the
// domain's message wins, being the more specific ("min (3) is more than max (2)"
// rather than "doesn't match any schema from oneOf").
func mergeViolations(schema, domain []container.Violation) []container.Violation {
	byField := map[string]bool{}
	for _, v := range domain {
		byField[v.Field] = true
	}
	out := make([]container.Violation, 0, len(schema)+len(domain))
	for _, v := range schema {
		if !byField[v.Field] {
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
