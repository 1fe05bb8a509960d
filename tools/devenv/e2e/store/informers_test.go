package store_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// A create reads back its own writes while the informers have not shown them (their
// watches held), and a write goes once the watch has shown it deleted: the container
// deleted behind the store's back is not read back from the overlay.
func TestOwnWritesUntilTheInformersShowThem(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	f.records.close()
	f.deployments.close()
	if _, err := f.s.Create(context.Background(), "x", objectsOf("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Get(context.Background(), "x"); err != nil {
		t.Fatalf("Get with the watches held = %v, want the container just created", err)
	}
	if page, _, err := f.s.List("", 10); err != nil || len(page) != 1 {
		t.Fatalf("List with the watches held = %d containers, %v; want 1", len(page), err)
	}
	deps, _, _ := what(t, f.ns, "x")
	client := testenv.Cluster(t).Client
	if err := client.AppsV1().Deployments(f.ns).Delete(context.Background(), deps[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.records.open()
	f.deployments.open()
	waitFor(t, "the Deployment's deletion drops the store's own write of it", func() bool {
		return len(f.s.Snapshot("x").Deployments) == 0
	})
	if n := f.s.Count(); n != 1 {
		t.Errorf("Count = %d, want 1 (the record lives)", n)
	}
}

// A write the informer never shows (made and deleted while its watch was down, then
// passed by a relist) leaves the overlay all the same.
func TestOwnWritesPassedByARelist(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	f.deployments.close()
	if _, err := f.s.Create(context.Background(), "x", objectsOf("x")); err != nil {
		t.Fatal(err)
	}
	deps, _, _ := what(t, f.ns, "x")
	client := testenv.Cluster(t).Client
	if err := client.AppsV1().Deployments(f.ns).Delete(context.Background(), deps[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.deployments.relist()
	waitFor(t, "a relist past the Deployment's deletion drops the store's own write of it", func() bool {
		return len(f.s.Snapshot("x").Deployments) == 0
	})
}
