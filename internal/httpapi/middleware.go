package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// A request body holds the container's spec, which becomes its Kubernetes objects (at
// most the per-container limit, SP_CONTAINER_MAX_BYTES, as JSON), plus what does not
// end up in them: provider_hints (at most container.MaxHintBytes), the spec's member
// names and the client's formatting. bodySlack covers those, so the body limit follows
// the per-container limit: a body larger than it cannot be a container that fits.
const bodySlack = 64 << 10

// MaxBodyBytes is the largest request body accepted with the default per-container
// limit (413 beyond); see Options.MaxContainerBytes.
const MaxBodyBytes = container.DefaultMaxObjectBytes + bodySlack

// DefaultMaxBodyReads is how many request bodies are read at once by default (503
// beyond, for requests with a body only). A body is read before the request takes an
// in-flight slot (withInFlightLimit), so clients that send theirs slowly hold these and
// not the slots GET and DELETE need; what they hold is at most DefaultMaxBodyReads ×
// the body limit (64 × 72 KiB = 4.5 MiB with the defaults).
const DefaultMaxBodyReads = 64

type ctxKey int

const requestIDKey ctxKey = iota

// RequestID returns the request's id (from X-Request-Id or generated).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// withRequestID takes the caller's X-Request-Id (if sane) or makes one, and echoes it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// statusRecorder remembers what was written, for the access log and for recover.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// withLogAndRecover logs every request and turns a panic into a 500 problem (the
// process keeps serving). A poll of health or a probe is logged at DEBUG: the registry
// and the kubelet poll every few seconds, and at INFO their lines were most of the log
// (287 of 344 lines in 9 minutes), hiding the requests that change something.
func withLogAndRecover(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving request", "request_id", RequestID(r.Context()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeProblem(rec, r, internal(fmt.Errorf("panic: %v", v)))
				}
			}
			level := slog.LevelInfo
			if isPoll(r) {
				level = slog.LevelDebug
			}
			log.Log(r.Context(), level, "request", "request_id", RequestID(r.Context()), "method", r.Method, "path", r.URL.Path,
				"status", rec.status, "duration_ms", float64(time.Since(start).Microseconds())/1000)
		}()
		next.ServeHTTP(rec, r)
	})
}

// withHead answers HEAD on every GET route as HTTP says (RFC 9110 §9.3.2): the GET's
// status and headers, Content-Length included, and no body. The contract and the
// router know GET only; what runs inside sees a GET.
func withHead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		get := r.WithContext(r.Context()) // a copy: the caller's request stays HEAD
		get.Method = http.MethodGet
		hw := &headWriter{ResponseWriter: w}
		next.ServeHTTP(hw, get)
		hw.finish()
	})
}

// headWriter holds back the status until the GET's answer is complete, so that it can
// say its length, and drops the body.
type headWriter struct {
	http.ResponseWriter
	status int
	size   int
}

func (h *headWriter) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

func (h *headWriter) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	h.size += len(b)
	return len(b), nil
}

func (h *headWriter) finish() {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	if h.Header().Get("Content-Length") == "" && h.status != http.StatusNoContent && h.status != http.StatusNotModified {
		h.Header().Set("Content-Length", strconv.Itoa(h.size))
	}
	h.ResponseWriter.WriteHeader(h.status)
}

// withLimits caps the body at maxBody bytes (413) and bounds the request's time.
func withLimits(timeout time.Duration, maxBody int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			writeProblem(w, r, tooLarge(maxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// withInFlightLimit answers 503 (Retry-After: 1) once max requests are being served,
// so a burst costs a known amount of memory and CPU (each request may hold a body of up
// to the body limit and its decoded form). Health is never refused: the registry and
// the probes must learn that the provider is busy, not that it is gone. It comes after
// withJSONBody: a request takes a slot only once its body is read, so slow senders
// cannot hold every slot.
func withInFlightLimit(max int, next http.Handler) http.Handler {
	if max <= 0 {
		return next
	}
	slots := make(chan struct{}, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isHealthPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			writeProblem(w, r, &Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 1,
				Detail: fmt.Sprintf("the provider is serving %d requests already; retry shortly", max)})
		}
	})
}

func isHealthPath(p string) bool {
	return p == "/health" || p == "/api/v1alpha1/containers/health"
}

// isPoll is a read of health or of a probe: what the registry, the kubelet and load
// balancers ask over and over.
func isPoll(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return isHealthPath(p) || p == ReadinessPath || p == LivenessPath
}

// Logged logs every request to next, as the API's are logged (health and probe polls at
// DEBUG), with a request id, and turns a panic into a 500 problem: for the handlers
// served beside the API (the probes).
func Logged(log *slog.Logger, next http.Handler) http.Handler {
	return withRequestID(withLogAndRecover(log, next))
}

func tooLarge(limit int64) *Problem {
	return &Problem{Status: http.StatusRequestEntityTooLarge, Code: "content-too-large",
		Detail: fmt.Sprintf("the request body is larger than %d bytes", limit)}
}

// createPath is the one operation that takes a body (POST).
const createPath = "/api/v1alpha1/containers"

// withJSONBody answers 400 for a body that is not JSON, as DCM's contract and the
// reference provider do: a Content-Type other than application/json, or content that
// is not one well-formed JSON value (trailing data included, which a streaming decoder
// would silently ignore). An empty body passes: the contract says whether one is needed.
// It reads the whole body before the request goes on (to the in-flight limit), at most
// maxReads bodies at once: 503 with Retry-After: 1 beyond, for requests with a body
// only.
func withJSONBody(maxReads int, maxBody int64, next http.Handler) http.Handler {
	if maxReads <= 0 {
		maxReads = DefaultMaxBodyReads
	}
	reading := make(chan struct{}, maxReads)
	read := func(r *http.Request) ([]byte, bool, error) {
		select {
		case reading <- struct{}{}:
			defer func() { <-reading }()
		default:
			return nil, false, nil
		}
		b, err := io.ReadAll(r.Body)
		return b, true, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != createPath || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		body, ok, err := read(r)
		var tooBig *http.MaxBytesError
		switch {
		case !ok:
			writeProblem(w, r, &Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 1,
				Detail: fmt.Sprintf("the provider is receiving %d request bodies already; retry shortly", maxReads)})
			return
		case errors.As(err, &tooBig):
			writeProblem(w, r, tooLarge(maxBody))
			return
		case err != nil:
			writeProblem(w, r, badRequest("the request body could not be read"))
			return
		}
		if len(body) > 0 {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "" && mt != "application/json" {
				writeProblem(w, r, badRequest(fmt.Sprintf("the request body must be JSON (Content-Type: application/json), not %s", mt)))
				return
			}
			if !json.Valid(body) {
				writeProblem(w, r, badRequest(syntaxProblem(body)))
				return
			}
			body = asContainer(body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// specMembers are ContainerSpec's members, by their JSON names.
var specMembers = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[v1alpha1.ContainerSpec]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			m[name] = true
		}
	}
	return m
}()

// asContainer reads a create's body (valid JSON) as a Container: one with a spec member
// is one; an object without it that has a member of ContainerSpec is the bare spec DCM's
// environment agent sends, and is wrapped ({"spec": body}), so that one validation and
// one handler serve both shapes. Anything else is left for the validation to say what
// is wrong ("spec is required …, or the body is the container spec itself").
func asContainer(body []byte) []byte {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return body
	}
	if _, ok := members["spec"]; ok {
		return body
	}
	for k := range members {
		if specMembers[k] {
			return slices.Concat([]byte(`{"spec":`), body, []byte(`}`))
		}
	}
	return body
}

// syntaxProblem says what is wrong with a body that is not JSON, and where: the line and
// column (in characters, from 1) and the byte (from 1), so the client can find it in
// what it sent.
func syntaxProblem(body []byte) string {
	const prefix = "the request body is not valid JSON"
	var se *json.SyntaxError
	if err := json.Unmarshal(body, new(json.RawMessage)); !errors.As(err, &se) || len(body) == 0 {
		return prefix
	}
	// Offset counts the bytes read, the offending one included; a body that ends too soon
	// has none, and its last byte is named.
	at := min(max(se.Offset, 1), int64(len(body)))
	if strings.Contains(se.Error(), "end of JSON input") {
		line, col := position(body, len(body)-1)
		return fmt.Sprintf("%s: it ends at line %d, column %d (byte %d), before the value is complete", prefix, line, col, len(body))
	}
	line, col := position(body, int(at)-1)
	return fmt.Sprintf("%s: %s, at line %d, column %d (byte %d)", prefix, se.Error(), line, col, at)
}

// position is the line and column, from 1, of the byte at index i of b.
func position(b []byte, i int) (line, col int) {
	before := b[:i]
	start := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte{'\n'}) + 1, utf8.RuneCount(before[start:]) + 1
}
