package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Clients that send their bodies slowly must not hold the slots every other request
// needs. Measured before the fix: 68 connections trickling their bodies held every API
// call at 503 for the server's 15 s read timeout, while /readyz said 200. Bodies are now
// read before a request takes its slot, so a GET is answered at once.
func TestTricklingBodiesDoNotHoldTheSlots(t *testing.T) {
	const slots = 4
	h, err := NewHandler(Options{Store: panicStore{}, MaxInFlight: slots, Health: func(context.Context) error { return nil },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 64) // a request reached the handler (its headers are read)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	// Twice as many POSTs as there are slots, each sending its headers and half its
	// body, then nothing.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	half := goodBody[:len(goodBody)/2]
	for range 2 * slots {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "POST /api/v1alpha1/containers?id=slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			len(goodBody), half); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 * slots { // every POST is in the handler, reading its body
		<-entered
	}

	client := &http.Client{Timeout: 2 * time.Second}
	for _, path := range []string{"/api/v1alpha1/containers/x", "/api/v1alpha1/containers"} {
		start := time.Now()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s while bodies trickle: %v", path, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s while %d bodies trickle: %d, want 200 or 404", path, 2*slots, resp.StatusCode)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("GET %s took %s", path, d)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/api/v1alpha1/containers/x", nil)
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE while bodies trickle: %v %v", resp, err)
	}

	// A trickling body that finishes is served as usual.
	c := conns[0]
	if _, err := io.WriteString(c, goodBody[len(half):]); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError { // panicStore's Create panics
		t.Errorf("the finished POST: %d", resp.StatusCode)
	}
}

// Beyond MaxBodyReads bodies being read, a request with a body is refused at once (503)
// and one without is still served.
func TestBodyReadsAreBounded(t *testing.T) {
	h, err := NewHandler(Options{Store: panicStore{}, MaxInFlight: 8, MaxBodyReads: 2, Health: func(context.Context) error { return nil },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	writers := make([]*io.PipeWriter, 0, 2)
	defer func() {
		for _, w := range writers {
			_ = w.Close()
		}
	}()
	started := make(chan struct{}, 2)
	for range 2 {
		r, w := io.Pipe()
		writers = append(writers, w)
		req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=a", &signalReader{r: r, read: started})
		req.Header.Set("Content-Type", "application/json")
		wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), req) })
		<-started
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=b", strings.NewReader(goodBody))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
		!strings.Contains(rec.Body.String(), "receiving 2 request bodies already") {
		t.Errorf("a third body: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1alpha1/containers/x", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("a GET meanwhile: %d %s", rec.Code, rec.Body)
	}
}

// signalReader tells read once its first Read has begun.
type signalReader struct {
	r    io.Reader
	read chan<- struct{}
	once sync.Once
}

func (s *signalReader) Read(p []byte) (int, error) {
	s.once.Do(func() { s.read <- struct{}{} })
	return s.r.Read(p)
}

// A create once the provider holds SP_MAX_CONTAINERS is a 507 problem naming both
// numbers, before any work in the cluster.
func TestContainerLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		count, max int
		status     int
	}{
		{"below the limit", 9, 10, http.StatusInternalServerError}, // reaches panicStore's Create
		{"at the limit", 10, 10, http.StatusInsufficientStorage},
		{"past it (replicas overshot)", 12, 10, http.StatusInsufficientStorage},
		{"no limit", 1 << 20, 0, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHandler(Options{Store: panicStore{}, MaxContainers: tc.max, Containers: func() int { return tc.count },
				Health: func(context.Context) error { return nil }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=a", strings.NewReader(goodBody))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.status != http.StatusInsufficientStorage {
				return
			}
			var p v1alpha1.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("the provider holds %d containers, its limit (SP_MAX_CONTAINERS) is %d", tc.count, tc.max)
			if p.Type != ProblemTypeBase+"container-limit-reached" || p.Title != "Container limit reached" || p.Status != 507 ||
				p.Detail == nil || !strings.Contains(*p.Detail, want) {
				t.Errorf("problem %+v, want detail %q", p, want)
			}
		})
	}
}

// sizedStore holds n containers, ids c-0000..., each with an env value of size bytes.
type sizedStore struct {
	panicStore
	obs []container.Observed
}

func newSizedStore(t *testing.T, n, size int) sizedStore {
	t.Helper()
	var s sizedStore
	for i := range n {
		spec := v1alpha1.ContainerSpec{
			ServiceType: v1alpha1.ContainerSpecServiceTypeContainer,
			Metadata:    v1alpha1.ContainerMetadata{Name: "web"},
			Image:       v1alpha1.ContainerImage{Reference: "nginx"},
			Process:     &v1alpha1.ContainerProcess{Env: &[]v1alpha1.EnvVar{{Name: "BLOB", Value: strings.Repeat("x", size)}}},
		}
		spec.Resources.Memory.Min, spec.Resources.Memory.Max = "1MB", "1MB"
		_ = spec.Resources.Cpu.Min.FromCpuQuantity0(1)
		_ = spec.Resources.Cpu.Max.FromCpuQuantity0(1)
		objs, err := container.Build(fmt.Sprintf("c-%04d", i), &spec, container.Options{Namespace: "ns"})
		if err != nil {
			t.Fatal(err)
		}
		s.obs = append(s.obs, objs.Observed())
	}
	return s
}

func (s sizedStore) List(after string, limit int) ([]container.Observed, bool, error) {
	i, _ := slices.BinarySearchFunc(s.obs, after, func(o container.Observed, id string) int {
		if o.Deployment.ID <= id {
			return -1
		}
		return 1
	})
	end := min(i+limit, len(s.obs))
	return s.obs[i:end], end < len(s.obs), nil
}

// A LIST page stops before the container that would take its encoded containers past
// maxPageBytes (at least one per page), with next_page_token as usual, and a walk by
// token returns every container once, whatever the page and run sizes.
func TestListPagesAreBoundedInBytes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n, size, page int
		wantPages     []int // containers per page
	}{
		{"small containers: pages by count", 250, 10, 100, []int{100, 100, 50}},
		{"a page of exactly 100 (one run): no token", 100, 10, 100, []int{100}},
		{"large containers: pages by bytes", 30, maxPageBytes / 10, 1000, []int{9, 9, 9, 3}},
		{"one container larger than the bound: one per page", 3, maxPageBytes + 1, 1000, []int{1, 1, 1}},
		{"max_page_size 1000 over many runs", 2500, 10, 1000, []int{1000, 1000, 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newSizedStore(t, tc.n, tc.size)
			h, err := NewHandler(Options{Store: st, Health: func(context.Context) error { return nil },
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			var ids []string
			token := ""
			for range 20 {
				target := fmt.Sprintf("/api/v1alpha1/containers?max_page_size=%d", tc.page)
				if token != "" {
					target += "&page_token=" + token
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
				if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("%d %s %.300s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
				}
				var list v1alpha1.ContainerList
				dec := json.NewDecoder(rec.Body)
				dec.DisallowUnknownFields()
				if err := dec.Decode(&list); err != nil {
					t.Fatal(err)
				}
				if len(list.Containers) > 1 {
					b, _ := json.Marshal(list.Containers)
					if len(b) > maxPageBytes+len(list.Containers) {
						t.Errorf("a page of %d bytes", len(b))
					}
				}
				got = append(got, len(list.Containers))
				for _, c := range list.Containers {
					ids = append(ids, *c.Id)
				}
				if list.NextPageToken == nil {
					break
				}
				token = *list.NextPageToken
			}
			if !slices.Equal(got, tc.wantPages) {
				t.Errorf("pages of %v, want %v", got, tc.wantPages)
			}
			if len(ids) != tc.n || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != tc.n {
				t.Errorf("the walk returned %d ids (sorted %v), want each of %d once", len(ids), slices.IsSorted(ids), tc.n)
			}
		})
	}
}

// max_page_size as AEP-158 says: none or 0 is the default (50), a size above the
// maximum (1000) is the maximum, not a 400; a negative one is refused.
func TestListPageSize(t *testing.T) {
	st := newSizedStore(t, 2500, 10)
	h, err := NewHandler(Options{Store: st, Health: func(context.Context) error { return nil },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query  string
		status int
		page   int // containers in the first page
	}{
		{"", 200, defaultPageSize},
		{"?max_page_size=0", 200, defaultPageSize},
		{"?max_page_size=1", 200, 1},
		{"?max_page_size=999", 200, 999},
		{"?max_page_size=1000", 200, maxPageSize},
		{"?max_page_size=1001", 200, maxPageSize},
		{"?max_page_size=5000", 200, maxPageSize},
		{"?max_page_size=2147483647", 200, maxPageSize},
		{"?max_page_size=-1", 400, 0},
		{"?max_page_size=-5000", 400, 0},
		{"?max_page_size=2147483648", 400, 0}, // not an int32
		{"?max_page_size=abc", 400, 0},
	} {
		t.Run(tc.query, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1alpha1/containers"+tc.query, nil))
			if rec.Code != tc.status {
				t.Fatalf("%d %.300s, want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.status != 200 {
				if !strings.Contains(rec.Body.String(), "max_page_size") {
					t.Errorf("the problem does not name max_page_size: %s", rec.Body)
				}
				return
			}
			var list v1alpha1.ContainerList
			if err := json.NewDecoder(rec.Body).Decode(&list); err != nil {
				t.Fatal(err)
			}
			if len(list.Containers) != tc.page || list.NextPageToken == nil {
				t.Errorf("a page of %d (next_page_token %v), want %d and a token", len(list.Containers), list.NextPageToken != nil, tc.page)
			}
		})
	}
}
