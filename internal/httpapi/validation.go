package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	middleware "github.com/oapi-codegen/nethttp-middleware"
	"github.com/oapi-codegen/runtime"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// withValidation checks every request against openapi.yaml (kin-openapi) before it
// reaches a handler, and answers routing and validation failures as problems.
func withValidation(next http.Handler, policy container.Policy) (http.Handler, error) {
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
		ErrorHandlerWithOpts: func(ctx context.Context, err error, w http.ResponseWriter, r *http.Request, opts middleware.ErrorHandlerOpts) {
			validationProblem(ctx, err, w, r, opts, policy)
		},
	})
	return mw(next), nil
}

func validationProblem(_ context.Context, err error, w http.ResponseWriter, r *http.Request, opts middleware.ErrorHandlerOpts, policy container.Policy) {
	// A body too large or not JSON never gets here: withJSONBody answered it.
	switch {
	case errors.Is(err, routers.ErrMethodNotAllowed):
		w.Header().Set("Allow", allowed(r))
		writeProblem(w, r, &Problem{Status: http.StatusMethodNotAllowed, Code: "method-not-allowed",
			Detail: fmt.Sprintf("method %s is not supported on %s", r.Method, r.URL.Path)})
		return
	case opts.MatchedRoute == nil:
		writeProblem(w, r, notFound(fmt.Sprintf("no such endpoint: %s", r.URL.Path)))
		return
	case opts.StatusCode >= 500:
		writeProblem(w, r, internal(err))
		return
	}
	vs, missing := violations(err)
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
		if decodeExact(r.Body, &c) == nil && c.Spec != nil {
			domain = append(domain, container.Validate(c.Spec, policy)...)
		}
		vs = mergeViolations(vs, domain, missing)
	}
	writeProblem(w, r, invalid(vs...))
}

// violations flattens kin-openapi's errors: parameters by name (no pointer), body
// fields by their JSON pointer, each detail naming the field in dotted form. missing
// are the pointers of the body's members that are required and absent.
func violations(err error) (out []container.Violation, missing []string) {
	readOnly := map[int]bool{} // indexes in out of read-only fields sent
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
			if key, ok := unknownMember(e); ok && param == "" {
				out = append(out, unknownField(e.JSONPointer(), key, e.Schema))
				return
			}
			if segs := e.JSONPointer(); e.SchemaField == "required" && param == "" && len(segs) > 0 {
				v := missingMember(segs, e.Schema)
				out, missing = append(out, v), append(missing, v.Pointer)
				return
			}
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
			detail := dotted(segs) + ": " + e.Reason
			if e.SchemaField == "readOnly" {
				// kin-openapi's reason ("readOnly property \"endpoints\" in request") names the
				// schema keyword; the client needs to know it is the provider's to fill.
				detail = dotted(segs) + " is read-only: the provider fills it in its answers; leave it out of a create"
				readOnly[len(out)] = true
			}
			out = append(out, container.Violation{Pointer: container.Pointer(segs...), Detail: detail})
		default:
			out = append(out, container.Violation{Param: param, Detail: orBody(param) + ": " + err.Error()})
		}
	}
	walk("", err)
	return withoutUnder(out, readOnly), missing
}

// missingMember is a required member that is absent, said as the domain says it
// ("metadata.name is required"), with the members it needs when it is an object, so that
// one answer says what to write: "image is required (an object with reference)".
func missingMember(segs []string, parent *openapi3.Schema) container.Violation {
	detail := container.Clip(dotted(segs), container.MaxQuoted) + " is required"
	if parent != nil {
		if ref := parent.Properties[segs[len(segs)-1]]; ref != nil && ref.Value != nil && len(ref.Value.Required) > 0 {
			detail += " (an object with " + and(ref.Value.Required) + ")"
		}
	}
	if len(segs) == 1 && segs[0] == "spec" {
		// The body had neither shape (asContainer).
		detail += ", or the body is the container spec itself"
	}
	return container.Violation{Pointer: container.Pointer(segs...), Detail: detail}
}

// and joins words as a sentence does: "a", "a and b", "a, b and c".
func and(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// unsupported is kin-openapi's reason for a member that additionalProperties: false
// refuses.
var unsupported = regexp.MustCompile(`^property (".*") is unsupported$`)

// unknownMember is the name of the member a schema error refuses as unknown.
func unknownMember(e *openapi3.SchemaError) (string, bool) {
	m := unsupported.FindStringSubmatch(e.Reason)
	if e.SchemaField != "properties" || m == nil {
		return "", false
	}
	key, err := strconv.Unquote(m[1])
	return key, err == nil
}

// unknownField is a member the schema does not have, named in DCM's dotted form and
// pointed at, with where a member of that name is when the client put it at the wrong
// place or in the wrong case ("env" in spec for process.env, "Spec" for spec): it
// would otherwise be dropped without a word, or (encoding/json matching names
// case-insensitively) read as another.
func unknownField(at []string, key string, schema *openapi3.Schema) container.Violation {
	segs := append(slices.Clone(at), key)
	detail := fmt.Sprintf("%s: unknown field, not in the container schema", container.Clip(dotted(segs), container.MaxQuoted))
	if near := nearest(schema, key); near != nil {
		detail += fmt.Sprintf(" (did you mean %s?)", dotted(append(slices.Clone(at), near...)))
	}
	ptr := container.Pointer(segs...)
	if len(key) > container.MaxQuoted {
		ptr = container.Pointer(at...) // bounded, like the detail
	}
	return container.Violation{Pointer: ptr, Detail: detail}
}

// nearest is the path, below the object schema, of the closest member named key in any
// case (breadth first, objects only, a few levels deep); nil when there is none.
func nearest(schema *openapi3.Schema, key string) []string {
	type node struct {
		s    *openapi3.Schema
		path []string
	}
	level := []node{{s: schema}}
	for depth := 0; depth < 3 && len(level) > 0; depth++ {
		var next []node
		for _, n := range level {
			if n.s == nil {
				continue
			}
			names := slices.Sorted(maps.Keys(n.s.Properties))
			for _, name := range names {
				if strings.EqualFold(name, key) {
					return append(slices.Clone(n.path), name)
				}
			}
			for _, name := range names {
				if ref := n.s.Properties[name]; ref != nil && ref.Value != nil && ref.Value.Type.Is("object") {
					next = append(next, node{s: ref.Value, path: append(slices.Clone(n.path), name)})
				}
			}
		}
		level = next
	}
	return misspelt(schema, key)
}

// misspelt is the member of schema one or two edits from key ("imagee" for image), if
// exactly one is that close.
func misspelt(schema *openapi3.Schema, key string) []string {
	if schema == nil || len(key) < 3 || len(key) > 64 {
		return nil
	}
	var found []string
	for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
		if editDistance(strings.ToLower(name), strings.ToLower(key)) <= min(2, len(name)/3) {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		return nil
	}
	return found
}

// editDistance is the Levenshtein distance of a and b (short ASCII names: a dependency
// for these few lines is not worth it).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// decodeExact decodes a create body with member names matched exactly, as the schema
// and the generated handler read them (encoding/json alone would take "Spec" for spec).
func decodeExact(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return err
	}
	return runtime.BindJSONValue(value, v)
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
// exceed cpu.max (2)" rather than "doesn't match any schema from oneOf"). A member the
// schema finds missing (its pointer in missing) is one mistake, said once: the domain's
// problems with it and with what it holds ("image.reference is required" beside "image
// is required"; four about resources' min and max) are its consequences, and dropped.
func mergeViolations(schema, domain []container.Violation, missing []string) []container.Violation {
	domain = slices.DeleteFunc(slices.Clone(domain), func(v container.Violation) bool {
		return slices.ContainsFunc(missing, func(m string) bool {
			return v.Pointer == m || strings.HasPrefix(v.Pointer, m+"/")
		})
	})
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

// allowed is the Allow header of a 405: the route's methods, HEAD with every GET
// (withHead).
func allowed(r *http.Request) string {
	if strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/containers") {
		return "GET, HEAD, POST"
	}
	if strings.HasSuffix(r.URL.Path, "/health") {
		return "GET, HEAD"
	}
	return "GET, HEAD, DELETE"
}

// withoutUnder drops, beside each read-only field sent (readOnly: their indexes in vs),
// the other problems of its value, at it or below it ("endpoints: value must be an
// array"): the field must go whatever it holds, so they would only bury the one problem
// that matters.
func withoutUnder(vs []container.Violation, readOnly map[int]bool) []container.Violation {
	if len(readOnly) == 0 {
		return vs
	}
	under := func(v container.Violation) bool {
		for j := range readOnly {
			if ro := vs[j].Pointer; v.Pointer == ro || strings.HasPrefix(v.Pointer, ro+"/") {
				return true
			}
		}
		return false
	}
	out := make([]container.Violation, 0, len(vs))
	for i, v := range vs {
		if readOnly[i] || !under(v) {
			out = append(out, v)
		}
	}
	return out
}
