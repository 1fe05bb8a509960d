package store

import (
	"fmt"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

func dep(id string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: container.SystemLabels(id)}}
}

// put puts a cached object (a cacheObject result) into the store's cache of kind k and
// through the store's handler, as its informer would.
func (s *Store) put(k kind, obj any) error {
	if err := s.informers()[k].GetIndexer().Add(obj); err != nil {
		return err
	}
	s.changed(k, nil, obj)
	return nil
}

func TestContainerIndex(t *testing.T) {
	x := newContainerIndex()
	d := func(name string) objRef { return objRef{name: name, kind: deploymentKind} }
	for i := 2999; i >= 0; i-- { // out of order, more than one run
		x.add(fmt.Sprintf("c%04d", i), d(fmt.Sprintf("web-%04d", i)))
	}
	x.remove("c0005", d("web-0005"))
	x.add("c0006", d("web-0006b")) // a second Deployment of the id (an old one being deleted)
	x.remove("c0006", d("web-0006"))
	x.add("c0007", objRef{name: "web-0007-abc", kind: podKind})
	x.add("c0007", objRef{name: "web-0007-abc", kind: podKind}) // again: no duplicate
	x.add("c9000", objRef{name: "dcm-container-c9000", kind: recordKind})
	x.add("c9001", objRef{name: "web-9001", kind: serviceKind}) // a Service left behind

	live := func(e *indexEntry) bool { return e.has(deploymentKind) }
	var got []string
	x.after("", live, func(id string, _ []objRef) bool { got = append(got, id); return true })
	if len(got) != 2999 || got[0] != "c0000" || got[5] != "c0006" || got[2998] != "c2999" {
		t.Fatalf("walk: %d ids, %v … %v", len(got), got[:7], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("out of order at %d: %s %s", i, got[i-1], got[i])
		}
	}
	var page []string
	x.after("c0004", live, func(id string, _ []objRef) bool { page = append(page, id); return len(page) < 3 })
	if fmt.Sprint(page) != "[c0006 c0007 c0008]" {
		t.Errorf("page after c0004 = %v", page)
	}
	if r := x.refs("c0007"); len(r) != 2 {
		t.Errorf("refs of c0007 = %v", r)
	}
	if r := x.refs("c0006"); fmt.Sprint(r) != "[{web-0006b 0}]" {
		t.Errorf("refs of c0006 = %v", r)
	}
	if x.refs("c0005") != nil || x.has("c0005", d("web-0005")) || !x.has("c2999", d("web-2999")) {
		t.Error("a removed container is still found, or a live one is not")
	}
	// Known: a Deployment or a record; a Service alone is not a container.
	if n := x.count(); n != 2999+1 {
		t.Errorf("count = %d, want 3000", n)
	}
	x.remove("c9000", objRef{name: "dcm-container-c9000", kind: recordKind})
	x.remove("c9001", objRef{name: "web-9001", kind: serviceKind})
	if n, l := x.count(), x.tree.Len(); n != 2999 || l != 2999 {
		t.Errorf("count %d, entries %d after the last objects of two ids went: want 2999, 2999", n, l)
	}
}

func TestRefOfTombstone(t *testing.T) {
	id, r := refOf(deploymentKind, cache.DeletedFinalStateUnknown{Key: "ns/web-1", Obj: dep("c1")})
	if id != "c1" || r != (objRef{name: "web-1", kind: deploymentKind}) {
		t.Errorf("refOf(tombstone) = %q, %v", id, r)
	}
}

// The transform shares an id the index does not have yet (an initial list transforms
// every object of a kind before any handler runs): the entry it makes holds no refs,
// is no container, and goes when its object's delete is handled.
func TestSharedIDBeforeTheHandlers(t *testing.T) {
	x := newContainerIndex()
	first := string([]byte("c1")) // the first kind's copy of the label value
	if got := x.sharedID(first); got != first {
		t.Fatalf("sharedID = %q", got)
	}
	second := string([]byte("c1")) // another kind's copy
	if got := x.sharedID(second); unsafe.StringData(got) != unsafe.StringData(first) {
		t.Error("the second object does not share the first one's id")
	}
	if x.count() != 0 || x.refs("c1") != nil {
		t.Errorf("an id only transformed is a container: count %d, refs %v", x.count(), x.refs("c1"))
	}
	x.add("c1", objRef{name: "web-1", kind: deploymentKind})
	if x.count() != 1 || len(x.refs("c1")) != 1 {
		t.Errorf("after its handler: count %d, refs %v", x.count(), x.refs("c1"))
	}
	x.sharedID("c2")                                     // a delete event's object, transformed...
	x.remove("c2", objRef{name: "web-2", kind: podKind}) // ...and handled: nothing held it
	if x.tree.Len() != 1 {
		t.Errorf("%d entries, want 1: the entry of a deleted object's id stayed", x.tree.Len())
	}
}
