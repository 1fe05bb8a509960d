package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// The reproductions from the hardening issue: what one hostile request costs is bounded
// before any work is done for it.
func TestRequestCostIsBounded(t *testing.T) {
	h := newTestHandler(t)
	spec := func(extra string) string {
		return `{"spec":{"service_type":"container","metadata":{"name":"web"` + extra + `},"image":{"reference":"nginx"},
 "resources":{"cpu":{"min":1,"max":1},"memory":{"min":"1MB","max":"1MB"}}}}`
	}
	withEnv := func(n int, name string) string {
		env := make([]string, n)
		for i := range env {
			env[i] = fmt.Sprintf(`{"name":%q,"value":""}`, name)
		}
		return strings.Replace(spec(""), `"image"`, `"process":{"env":[`+strings.Join(env, ",")+`]},"image"`, 1)
	}
	badLabels := func(n int) string {
		l := make([]string, n)
		for i := range l {
			l[i] = fmt.Sprintf(`"bad key %d":"v"`, i)
		}
		return spec(`,"labels":{` + strings.Join(l, ",") + `}`)
	}
	bigEnv := func() string {
		env := make([]string, 9)
		for i := range env {
			env[i] = fmt.Sprintf(`{"name":"V%d","value":%q}`, i, strings.Repeat("x", 1000))
		}
		return strings.Replace(spec(""), `"image"`, `"process":{"env":[`+strings.Join(env, ",")+`]},"image"`, 1)
	}
	for _, tc := range []struct {
		name       string
		body       string
		maxAnswer  int
		wantDetail []string
	}{
		{"3,000 env entries (as many as the body limit allows): one answer of a few KB", withEnv(3000, "B"), 16 << 10,
			[]string{"at most 128"}},
		{"64 bad label keys: 50 listed, the rest counted", badLabels(64), 32 << 10,
			[]string{"and 14 more"}},
		{"every field within its limit, the objects too large", bigEnv(), 4 << 10,
			[]string{"Kubernetes objects would be", fmt.Sprintf("at most %d", container.DefaultMaxObjectBytes)}},
		// Found by the fuzzing helper: problems quoted the client's value in full, and
		// JSON escapes '<' as 6 bytes: a 1 MiB name gave a 6.29 MB answer.
		{"a name of '<' as long as the body allows", strings.Replace(spec(""), `"name":"web"`, `"name":"`+strings.Repeat("<", MaxBodyBytes-400)+`"`, 1), 8 << 10,
			[]string{"bytes in all"}},
		{"a 33 KB image reference", strings.Replace(spec(""), `"reference":"nginx"`, `"reference":"`+strings.Repeat("A", 33000)+`"`, 1), 8 << 10,
			[]string{"bytes in all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.body) > MaxBodyBytes {
				t.Fatalf("test body %d bytes", len(tc.body))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=x", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			if rec.Code != http.StatusBadRequest || rec.Body.Len() > tc.maxAnswer {
				t.Fatalf("%d, %d bytes: %.300s", rec.Code, rec.Body.Len(), rec.Body)
			}
			for _, w := range tc.wantDetail {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("answer does not say %q: %.500s", w, rec.Body)
				}
			}
			var p v1alpha1.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Errors != nil && len(*p.Errors) > 51 {
				t.Errorf("%d errors listed", len(*p.Errors))
			}
			// Before the limits, the first body allocated 162 MB for 80,000 violations.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 80<<20 {
				t.Errorf("one request allocated %d MB", alloc>>20)
			}
			t.Logf("%d bytes in, %d bytes out, %d MB allocated", len(tc.body), rec.Body.Len(), (after.TotalAlloc-before.TotalAlloc)>>20)
		})
	}
}

// blockingStore holds every Get until release is closed.
type blockingStore struct {
	panicStore
	entered chan struct{}
	release chan struct{}
}

func (b blockingStore) Get(context.Context, string) (container.Observed, error) {
	b.entered <- struct{}{}
	<-b.release
	return container.Observed{}, store.ErrNotFound
}

func TestInFlightCap(t *testing.T) {
	bs := blockingStore{entered: make(chan struct{}, 10), release: make(chan struct{})}
	h, err := NewHandler(Options{Store: bs, MaxInFlight: 2, Health: func(context.Context) error { return nil },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { get("/api/v1alpha1/containers/x") })
		<-bs.entered
	}
	busy := get("/api/v1alpha1/containers/y")
	if busy.Code != http.StatusServiceUnavailable || busy.Header().Get("Retry-After") != "1" ||
		!strings.Contains(busy.Body.String(), "serving 2 requests already") {
		t.Errorf("third request: %d %v %s", busy.Code, busy.Header(), busy.Body)
	}
	if rec := get("/health"); rec.Code != http.StatusOK {
		t.Errorf("health while busy: %d", rec.Code)
	}
	close(bs.release)
	wg.Wait()
	if rec := get("/api/v1alpha1/containers/z"); rec.Code != http.StatusNotFound {
		t.Errorf("after the burst: %d %s", rec.Code, rec.Body)
	}
}
