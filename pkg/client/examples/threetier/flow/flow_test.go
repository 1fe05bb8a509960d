package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/pkg/client"
	"github.com/dcm-project/k8s-container-sp/pkg/client/examples/threetier/flow"
)

// fake answers the flow's three requests; gets says how many GETs answer without a
// Service before one with it, or -1 for a 404.
type fake struct {
	mu       sync.Mutex
	gets     int
	deleteAs int
	calls    []string
	body     map[string]any
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.RequestURI())
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPost:
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
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return flow.Run(ctx, c, flow.Options{Poll: time.Millisecond})
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
