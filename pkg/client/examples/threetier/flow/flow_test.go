package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/pkg/client"
	"github.com/dcm-project/k8s-container-sp/pkg/client/examples/threetier/flow"
)

// fake answers the flow's three requests; gets says how many GETs answer without a
// Service before one with it, or -1 for a 404; conflicts how many POSTs answer 409 of
// type conflict (default being-deleted) with Retry-After retryAfter before one is 201.
type fake struct {
	mu         sync.Mutex
	gets       int
	deleteAs   int
	conflicts  int
	conflict   string
	retryAfter string
	calls      []string
	posts      []time.Time
	body       map[string]any
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.RequestURI())
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPost:
		f.posts = append(f.posts, time.Now())
		if f.conflicts > 0 {
			f.conflicts--
			code := f.conflict
			if code == "" {
				code = "being-deleted"
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", f.retryAfter)
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"type":"https://dcm-project.github.io/problems/` + code + `","title":"t","status":409,` +
				`"detail":"the previous container with this id is being deleted; nothing was created; retry after 5 s"}`))
			return
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &f.body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"db","status":"PENDING","spec":{}}`))
	case http.MethodGet:
		switch {
		case f.gets < 0:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"https://dcm-project.github.io/problems/not-found","title":"Not found","status":404}`))
		case f.gets > 0:
			f.gets--
			_, _ = w.Write([]byte(`{"id":"db","status":"PENDING","spec":{}}`))
		default:
			_, _ = w.Write([]byte(`{"id":"db","status":"RUNNING","spec":{},"service":{"name":"db-x7k2p","type":"ClusterIP","ports":[{"port":5432,"target_port":5432,"protocol":"TCP"}]}}`))
		}
	case http.MethodDelete:
		w.WriteHeader(f.deleteAs)
	}
}

func run(t *testing.T, f *fake) (flow.Result, error) {
	t.Helper()
	return runWith(t, f, flow.Options{Poll: time.Millisecond})
}

func runWith(t *testing.T, f *fake, o flow.Options) (flow.Result, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return flow.Run(ctx, c, o)
}

func TestRunWaitsForTheServiceName(t *testing.T) {
	f := &fake{gets: 2, deleteAs: http.StatusNoContent}
	res, err := run(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServiceName != "db-x7k2p" {
		t.Errorf("service name %q, want db-x7k2p", res.ServiceName)
	}
	want := []string{"POST /api/v1alpha1/containers?id=db", "GET /api/v1alpha1/containers/db",
		"GET /api/v1alpha1/containers/db", "GET /api/v1alpha1/containers/db", "DELETE /api/v1alpha1/containers/db"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("requests %q, want %q", f.calls, want)
	}
	// The create body is the API's shape (member names from openapi.yaml).
	spec := f.body["spec"].(map[string]any)
	port := spec["network"].(map[string]any)["ports"].([]any)[0].(map[string]any)
	if spec["service_type"] != "container" || spec["metadata"].(map[string]any)["name"] != "db" ||
		port["container_port"] != 5432.0 || port["visibility"] != "internal" ||
		spec["resources"].(map[string]any)["cpu"].(map[string]any)["min"] != 1.0 {
		t.Errorf("create body: %v", f.body)
	}
	if _, ok := f.body["service"]; ok {
		t.Errorf("create body sends the read-only service: %v", f.body)
	}
}

func TestRunGetNotFoundIsAFailedCreate(t *testing.T) {
	f := &fake{gets: -1, deleteAs: http.StatusNotFound}
	_, err := run(t, f)
	if !errors.Is(err, flow.ErrCreateFailed) {
		t.Fatalf("err %v, want ErrCreateFailed", err)
	}
	// The DELETE is still sent, and its 404 is not an error.
	if last := f.calls[len(f.calls)-1]; last != "DELETE /api/v1alpha1/containers/db" {
		t.Errorf("last request %q, want the DELETE", last)
	}
}

// A create answered 409 being-deleted (the id's previous container's deletion is not
// delivered yet) is sent again after the answer's Retry-After, and the flow goes on.
func TestCreateWaitsOutBeingDeleted(t *testing.T) {
	f := &fake{conflicts: 1, retryAfter: "1", deleteAs: http.StatusNoContent}
	var logged []string
	res, err := runWith(t, f, flow.Options{Poll: time.Millisecond, Logf: func(format string, args ...any) {
		logged = append(logged, fmt.Sprintf(format, args...))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ServiceName != "db-x7k2p" {
		t.Errorf("service name %q, want db-x7k2p", res.ServiceName)
	}
	want := []string{"POST /api/v1alpha1/containers?id=db", "POST /api/v1alpha1/containers?id=db",
		"GET /api/v1alpha1/containers/db", "DELETE /api/v1alpha1/containers/db"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("requests %q, want %q", f.calls, want)
	}
	if gap := f.posts[1].Sub(f.posts[0]); gap < time.Second {
		t.Errorf("the create was sent again %s after the 409, before its Retry-After (1 s)", gap)
	}
	if len(logged) == 0 || !strings.Contains(logged[0], "being deleted; nothing was created") || !strings.Contains(logged[0], "again in 1s") {
		t.Errorf("the retry is not told: %q", logged)
	}
}

// The retries are bounded (CreateRetry): a wait that would end past the bound is not
// taken, and the 409 is the error. Another 409 (already-exists) is never retried.
func TestCreateRetryIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *fake
		o    flow.Options
	}{
		{"Retry-After past the bound", &fake{conflicts: 100, retryAfter: "5"}, flow.Options{CreateRetry: 2 * time.Second}},
		{"no retry", &fake{conflicts: 100, retryAfter: "1"}, flow.Options{CreateRetry: -1}},
		{"already exists", &fake{conflicts: 100, conflict: "already-exists", retryAfter: "1"}, flow.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := runWith(t, tc.f, tc.o)
			if err == nil || !strings.Contains(err.Error(), "409 Conflict") {
				t.Fatalf("err %v, want the 409", err)
			}
			if len(tc.f.calls) != 1 || time.Since(start) > 500*time.Millisecond {
				t.Errorf("requests %q in %s, want the one POST at once", tc.f.calls, time.Since(start))
			}
		})
	}
}

// Within the bound, it keeps trying: 409 twice, 201 the third time.
func TestCreateRetriesUntilTheBound(t *testing.T) {
	f := &fake{conflicts: 2, retryAfter: "0", deleteAs: http.StatusNoContent}
	if _, err := runWith(t, f, flow.Options{Poll: time.Millisecond, CreateRetry: time.Second}); err != nil {
		t.Fatal(err)
	}
	if len(f.posts) != 3 {
		t.Errorf("%d POSTs, want 3: %q", len(f.posts), f.calls)
	}
}
