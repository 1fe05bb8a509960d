package store

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Count is every id the caches know through a Deployment or a record, each once.
func TestCount(t *testing.T) {
	s := emptyStore(t)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	add := func(i int, kinds ...int) { // kinds: 0 Deployment, 3 record (served's order)
		objs := served(i, now)
		for _, k := range kinds {
			if err := s.put(kind(k), decoded(objs[k])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := s.Count(); n != 0 {
		t.Fatalf("empty caches: %d", n)
	}
	add(0, 0, 3) // live, with its record
	add(1, 0, 3)
	add(2, 3) // a create in progress, or a DELETED owed: its record only
	add(3, 0) // a Deployment without a record (made before records)
	if n := s.Count(); n != 4 {
		t.Errorf("Count = %d, want 4", n)
	}
}
