package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
	"github.com/dcm-project/k8s-container-sp/internal/logtest"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
)

// quotaStore refuses every create as a ResourceQuota does.
type quotaStore struct{ panicStore }

const quotaMessage = `deployments.apps "web-x" is forbidden: exceeded quota: tenant-b-quota, requested: limits.memory=2Gi, used: limits.memory=61Gi, limited: limits.memory=62Gi`

func (quotaStore) Create(context.Context, string, container.Objects) (container.Observed, error) {
	return container.Observed{}, &kubeerr.Error{Kind: kubeerr.KindQuota, Message: "a resource quota refused the container",
		Fields: []container.Violation{{Pointer: "#/spec/resources", Detail: "resources: " + kubeerr.QuotaText(quotaMessage)}},
		Err:    errors.New(quotaMessage)}
}

// A create a ResourceQuota refuses answers which resource ran out, in fixed words, not
// the namespace's usage or the quota's name; the log has the quota's message, with the
// request's id.
func TestQuotaRefusalAnswersAFixedTextAndLogsTheDetail(t *testing.T) {
	logs := &logtest.Buffer{}
	h, err := NewHandler(Options{Store: quotaStore{}, Health: func(context.Context) error { return nil },
		Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=web-x", strings.NewReader(goodBody))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Code != http.StatusForbidden || !strings.Contains(body, "the containers' namespace quota does not allow this container (limits.memory)") {
		t.Errorf("%d %s", rec.Code, body)
	}
	for _, leak := range []string{"61Gi", "62Gi", "used:", "limited:", "tenant-b-quota"} {
		if strings.Contains(body, leak) {
			t.Errorf("the answer shows %q: %s", leak, body)
		}
	}
	id := rec.Header().Get("X-Request-Id")
	if !strings.Contains(logs.String(), "create refused by a resource quota") || !strings.Contains(logs.String(), "used: limits.memory=61Gi") ||
		!strings.Contains(logs.String(), id) {
		t.Errorf("the log lacks the quota's message or the request id %s:\n%s", id, logs)
	}
}

// Health answers anyone: a registry that refuses the registration (and says why, with
// its host names) or cannot be reached shows as a fixed text per reason.
func TestHealthShowsNoRegistryDetail(t *testing.T) {
	const detail = "db-primary.internal.example:5432 refused: pq: password authentication failed"
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"detail": "` + detail + `"}`))
	}))
	defer reg.Close()
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	r, err := registration.New(registration.Options{RegistryURL: reg.URL + "/api/v1alpha1", Name: "sp", Endpoint: "http://sp:8080"}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, func(context.Context) error { return nil }) }()
	defer func() { cancel(); <-done }()
	h, err := NewHandler(Options{Store: panicStore{}, Health: func(context.Context) error { return nil }, Registration: r.State, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.State().Phase != registration.Rejected {
		if time.Now().After(deadline) {
			t.Fatalf("not rejected: %+v", r.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, path := range []string{"/health", "/api/v1alpha1/containers/health"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body := rec.Body.String()
		if !strings.Contains(body, `"last_error":"the registrar refused the registration body; the log has its reason"`) || !strings.Contains(body, `"status":"rejected"`) {
			t.Errorf("%s: %s", path, body)
		}
		for _, leak := range []string{"db-primary", "422", "127.0.0.1", "password"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s shows %q: %s", path, leak, body)
			}
		}
	}
	if !strings.Contains(logs.String(), detail) {
		t.Errorf("the log lacks the registry's answer:\n%s", logs)
	}
}

// Health shows the event channel and stays healthy with NATS down: a provider that
// cannot publish still serves.
func TestHealthShowsTheEventChannel(t *testing.T) {
	h, err := NewHandler(Options{Store: panicStore{}, Health: func(context.Context) error { return nil },
		Events: func() (bool, int) { return false, 3 }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
	if body := rec.Body.String(); rec.Code != http.StatusOK || !strings.Contains(body, `"status":"healthy"`) ||
		!strings.Contains(body, `"events":{"connected":false,"undelivered":3}`) {
		t.Errorf("health: %d %s", rec.Code, body)
	}
}
