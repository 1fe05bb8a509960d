package store

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
