package store

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/httpapi"
)

// filledStore is a Store whose caches hold n containers, put in as their watches would
// (decoded, transformed, indexed). Its informers never start: the client
// points nowhere and is never called.
func filledStore(b *testing.B, n int) *Store {
	s := emptyStore(b)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range n {
		for k, obj := range served(i, now) {
			if err := s.put(kind(k), decoded(obj)); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// emptyStore is a Store whose informers never start: the client points nowhere and is
// never called.
func emptyStore(tb testing.TB) *Store {
	return storeOver(tb, &rest.Config{Host: "http://127.0.0.1:1"}, "dcm-containers")
}

// storeOver is a Store of namespace ns whose client talks to cfg's host; its informers
// are not started.
func storeOver(tb testing.TB, cfg *rest.Config, ns string) *Store {
	tb.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := New(client, ns, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkListPage is one page of 50 from the middle of the id order: the store's part
// of a LIST request, whose cost should not grow with the number of containers.
// go test -run '^$' -bench ListPage ./internal/store
func BenchmarkListPage(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := filledStore(b, n)
			after := fmt.Sprintf("bench-%05d", n/2)
			b.ResetTimer()
			for b.Loop() {
				page, more := s.page(after, 50)
				if len(page) != 50 || !more {
					b.Fatalf("page of %d, more %v", len(page), more)
				}
			}
		})
	}
}

// BenchmarkListAnswer is a whole LIST answer of 50 from the HTTP handler, encoding
// included, with the binary's collector target (app.DefaultGOGC): at the larger size the
// collector marks a larger heap, which is the part of a page's cost that grows.
// go test -run '^$' -bench ListAnswer ./internal/store
func BenchmarkListAnswer(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h, err := httpapi.NewHandler(httpapi.Options{Store: synced{filledStore(b, n)},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Containers: func() int { return n }})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w := &discard{header: http.Header{}}
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1alpha1/containers?max_page_size=50", nil))
				if w.code != http.StatusOK {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

// synced is a Store whose informers count as synced: List reads the caches at once.
type synced struct{ *Store }

func (s synced) List(after string, limit int) ([]container.Observed, bool, error) {
	out, more := s.page(after, limit)
	return out, more, nil
}

// discard is a ResponseWriter that keeps only the status, as a socket would keep nothing.
type discard struct {
	header http.Header
	code   int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }
