package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/logtest"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// panicStore stands in for the cluster only where the HTTP layer's own behaviour is under
// test (the store itself is tested against the real control plane).
type panicStore struct{}

func (panicStore) Create(context.Context, string, container.Objects) (container.Observed, error) {
	panic("boom")
}
func (panicStore) Get(context.Context, string) (container.Observed, error) {
	return container.Observed{}, store.ErrNotFound
}
func (panicStore) List(string, int) ([]container.Observed, bool, error) {
	return nil, false, nil
}
func (panicStore) Delete(context.Context, string) error { return store.ErrNotFound }

func newTestHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := NewHandler(Options{
		Store:  panicStore{},
		Health: func(context.Context) error { return nil },
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const goodBody = `{"spec":{"service_type":"container","metadata":{"name":"web"},"image":{"reference":"nginx"},
 "resources":{"cpu":{"min":1,"max":1},"memory":{"min":"1MB","max":"1MB"}}}}`

// A panic in a handler is a 500 problem without internals, and the server keeps going.
func TestPanicBecomesProblem(t *testing.T) {
	h := newTestHandler(t)
	for range 2 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=a", strings.NewReader(goodBody))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != 500 || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		if strings.Contains(rec.Body.String(), "boom") {
			t.Errorf("500 leaks the panic: %s", rec.Body)
		}
		if rec.Header().Get("X-Request-Id") == "" {
			t.Error("no request id")
		}
	}
}

func TestRequestIDEchoed(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/v1alpha1/containers/abc", nil)
	req.Header.Set("X-Request-Id", "req-42")
	newTestHandler(t).ServeHTTP(rec, req)
	var p map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	if rec.Code != 404 || rec.Header().Get("X-Request-Id") != "req-42" || p["instance"] != "/api/v1alpha1/containers/abc" {
		t.Errorf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

func TestNonJSONContentTypeIs400(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers", strings.NewReader("spec: {}"))
	req.Header.Set("Content-Type", "application/yaml")
	newTestHandler(t).ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
	if rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("not a problem: %s", rec.Body)
	}
}

func TestPageToken(t *testing.T) {
	for _, id := range []string{"a", "web-1", "123e4567-e89b-12d3-a456-426614174000"} {
		got, ok := decodePageToken(encodePageToken(id))
		if !ok || got != id {
			t.Errorf("round trip %q -> %q %v", id, got, ok)
		}
	}
	for _, tok := range []string{"", "!!", "YWJj", encodePageToken("Bad_ID")} {
		if _, ok := decodePageToken(tok); ok {
			t.Errorf("token %q accepted", tok)
		}
	}
}

func TestDotted(t *testing.T) {
	for in, want := range map[string]string{
		"spec/network/ports/1/visibility": "network.ports[1].visibility",
		"spec/resources/cpu/min":          "resources.cpu.min",
		"spec":                            "spec",
		"id":                              "id",
		"":                                "",
	} {
		var segs []string
		if in != "" {
			segs = strings.Split(in, "/")
		}
		if got := dotted(segs); got != want {
			t.Errorf("dotted(%q) = %q, want %q", in, got, want)
		}
	}
}

// Health and probe polls are logged at DEBUG, every other request at INFO: the
// registry's and the kubelet's polls were 287 of 344 INFO lines in 9 minutes.
func TestPollsAreLoggedAtDebug(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := NewHandler(Options{Store: panicStore{}, Health: func(context.Context) error { return nil }, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(ReadinessPath, Logged(log, Readiness()))
	mux.Handle(LivenessPath, Logged(log, Liveness()))
	mux.Handle("/", h)
	for _, tc := range []struct{ method, path, level string }{
		{"GET", "/health", "DEBUG"},
		{"HEAD", "/health", "DEBUG"},
		{"GET", "/api/v1alpha1/containers/health", "DEBUG"},
		{"GET", "/readyz", "DEBUG"},
		{"GET", "/livez", "DEBUG"},
		{"GET", "/api/v1alpha1/containers/abc", "INFO"},
		{"DELETE", "/api/v1alpha1/containers/health", "INFO"}, // not a poll: a 405 someone should see
	} {
		before := len(buf.String())
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
		var line struct{ Level, Msg, Method, Path, Request_ID string }
		if err := json.Unmarshal([]byte(buf.String()[before:]), &line); err != nil {
			t.Fatalf("%s %s: not one log line: %v: %q", tc.method, tc.path, err, buf.String()[before:])
		}
		if line.Level != tc.level || line.Msg != "request" || line.Method != tc.method || line.Path != tc.path || line.Request_ID == "" {
			t.Errorf("%s %s: %+v, want a %s request line with a request id", tc.method, tc.path, line, tc.level)
		}
	}

	// At the default level, INFO, the polls write nothing.
	var quiet logtest.Buffer
	log = slog.New(slog.NewJSONHandler(&quiet, nil))
	h, err = NewHandler(Options{Store: panicStore{}, Health: func(context.Context) error { return nil }, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/health", "/api/v1alpha1/containers/health"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	Logged(log, Readiness()).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/readyz", nil))
	if quiet.String() != "" {
		t.Errorf("polls logged at INFO: %s", quiet.String())
	}
}
