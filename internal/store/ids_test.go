package store

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

func dep(id string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: container.SystemLabels(id)}}
}

func TestIDSetOrderAndPaging(t *testing.T) {
	remaining := map[string]bool{}
	s := newIDSet(func(id string) bool { return remaining[id] })
	h := s.handler()
	for i := 2999; i >= 0; i-- { // out of order, more than one internal batch
		h.OnAdd(dep(fmt.Sprintf("c%04d", i)), false)
	}
	h.OnDelete(dep("c0005"))
	remaining["c0006"] = true // another Deployment with this id is still cached
	h.OnDelete(cache.DeletedFinalStateUnknown{Obj: dep("c0006")})

	var got []string
	s.after("", func(id string) bool { got = append(got, id); return true })
	if len(got) != 2999 || got[0] != "c0000" || got[5] != "c0006" || got[2998] != "c2999" {
		t.Fatalf("walk: %d ids, %v … %v", len(got), got[:7], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("out of order at %d: %s %s", i, got[i-1], got[i])
		}
	}
	var page []string
	s.after("c0004", func(id string) bool { page = append(page, id); return len(page) < 3 })
	if fmt.Sprint(page) != "[c0006 c0007 c0008]" {
		t.Errorf("page after c0004 = %v", page)
	}
	if !s.contains("c2999") || s.contains("c0005") {
		t.Error("contains")
	}
}
