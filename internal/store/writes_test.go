package store

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// unstarted is a Store whose informers never start: its caches stay empty, so what a
// read finds is only what the store wrote itself. Its client points nowhere; nothing
// here sends a request.
func unstarted(t *testing.T) *Store {
	return storeOver(t, &rest.Config{Host: "http://127.0.0.1:1"}, "ns")
}

// createdX is container x's record, Deployment and Service as the apiserver answers a
// create of them (names, UIDs, resourceVersions filled).
func createdX(t *testing.T) (*corev1.ConfigMap, *appsv1.Deployment, *corev1.Service) {
	t.Helper()
	rec := container.NewRecord("x", container.Request{})
	rec.Namespace, rec.UID, rec.ResourceVersion = "ns", "0b3c5a6e-6f5e-4c9d-8f7e-000000000001", "10"
	rec.CreationTimestamp = metav1.Now()
	var c v1alpha1.Container
	if err := json.Unmarshal([]byte(`{"spec": {"service_type": "container", "metadata": {"name": "web"},
		"image": {"reference": "quay.io/example/web:v1"},
		"resources": {"cpu": {"min": 1, "max": 1}, "memory": {"min": "64MB", "max": "64MB"}},
		"network": {"ports": [{"container_port": 80, "visibility": "internal"}]}}}`), &c); err != nil {
		t.Fatal(err)
	}
	objs, err := container.Build("x", &c.Spec, container.Options{Namespace: "ns", ExternalServiceType: corev1.ServiceTypeLoadBalancer})
	if err != nil {
		t.Fatal(err)
	}
	objs = objs.OwnedBy(rec.Name, rec.UID)
	dep, svc := objs.Deployment, objs.Service
	dep.Name, dep.Namespace, dep.UID, dep.ResourceVersion = "web-abcde", "ns", "0b3c5a6e-6f5e-4c9d-8f7e-000000000002", "11"
	svc.Name, svc.Namespace, svc.UID, svc.ResourceVersion = "web-fghij", "ns", "0b3c5a6e-6f5e-4c9d-8f7e-000000000003", "12"
	return rec, dep, svc
}

// Read-your-writes: what a create wrote is read back from this replica's caches before
// any watch has shown it (Store.wrote), and a DELETE's answer (the record
// terminating) hides the container at once.
func TestWritesAreReadBackBeforeTheWatch(t *testing.T) {
	s := unstarted(t)
	rec, dep, svc := createdX(t)
	if snap := s.Snapshot("x"); !snap.Empty() {
		t.Fatalf("an unstarted store shows %+v", snap)
	}
	s.wrote(rec)
	s.wrote(dep)
	s.wrote(svc)
	o, ok := s.Snapshot("x").Observed()
	if !ok || o.Deployment.Name != dep.Name || o.Deployment.UID != dep.UID || o.Service == nil || o.Service.Name != svc.Name {
		t.Fatalf("after the create's writes: %+v %v; want the container", o, ok)
	}
	if page, _ := s.page("", 10); len(page) != 1 {
		t.Errorf("a LIST page after the create: %d containers, want 1", len(page))
	}
	if ids := s.IDs(); len(ids) != 1 || ids[0] != "x" {
		t.Errorf("IDs %v", ids)
	}

	gone := rec.DeepCopy()
	now := metav1.NewTime(time.Now())
	gone.DeletionTimestamp, gone.ResourceVersion = &now, "13"
	s.wrote(gone)
	if _, ok := s.Snapshot("x").Observed(); ok {
		t.Error("after the DELETE's answer the container is still shown")
	}
	if r := s.Snapshot("x").Record; r == nil || !r.Terminating || !r.Owed {
		t.Errorf("the record after the DELETE: %+v, want it terminating, owed", r)
	}
	// An older write never hides a newer one (resourceVersions compare).
	s.wrote(rec)
	if r := s.Snapshot("x").Record; r == nil || !r.Terminating {
		t.Errorf("an older answer read over a newer one: %+v", r)
	}
}

// The watch's deletion of an object drops this replica's write of it, and a write the
// apiserver answered before that delete, laid over the informers after it, is not read back:
// a read does not bring back what the watch has seen go. A new object of the same name
// (a record made again) is.
func TestAWatchDeleteDropsTheWrite(t *testing.T) {
	s := unstarted(t)
	rec, dep, _ := createdX(t)
	s.wrote(rec)
	s.wrote(dep)
	if err := s.remove(deployments, dep); err != nil {
		t.Fatal(err)
	}
	if snap := s.Snapshot("x"); len(snap.Deployments) != 0 || snap.Live() != nil {
		t.Errorf("after the watch's delete: %+v", snap.Deployments)
	}
	if err := s.remove(records, rec); err != nil {
		t.Fatal(err)
	}
	s.wrote(rec) // an answer that comes late
	if r := s.Snapshot("x").Record; r != nil {
		t.Errorf("a write older than the watch's delete is read back: %+v", r)
	}
	again := rec.DeepCopy()
	again.UID, again.ResourceVersion = "0b3c5a6e-6f5e-4c9d-8f7e-000000000009", "20"
	s.wrote(again)
	if r := s.Snapshot("x").Record; r == nil || r.UID != again.UID {
		t.Errorf("a record made again after the delete is not read: %+v", r)
	}
}

func TestLookupOf(t *testing.T) {
	if lookupOf(nil) != answered || lookupOf(apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")) != absent || lookupOf(io.EOF) != failed {
		t.Error("lookupOf")
	}
}

// A relist (or a bookmark) past a write that the informer never showed drops the write
// with no event of it, and the store's watchers hear of its container: a Deployment made
// and deleted while the watch was down is not read back, and the status controller
// looks at the container again.
func TestARelistDropsTheWritesItPassed(t *testing.T) {
	s := unstarted(t)
	rec, dep, _ := createdX(t)
	s.wrote(rec)
	s.wrote(dep)
	var told []string
	stop := s.informers.watch(func(id string) { told = append(told, id) })
	defer stop()
	if err := s.informers.of[deployments].GetIndexer().Replace(nil, "11"); err != nil {
		t.Fatal(err)
	}
	if snap := s.Snapshot("x"); len(snap.Deployments) != 0 || snap.Record == nil {
		t.Errorf("after a relist at the Deployment's version: %d Deployments, record %v; want none and the record",
			len(snap.Deployments), snap.Record != nil)
	}
	s.informers.sweep()
	if len(told) != 1 || told[0] != "x" {
		t.Errorf("the watchers were told %v, want [x]", told)
	}
	if ids := s.IDs(); len(ids) != 1 {
		t.Errorf("IDs %v, want [x] (its record lives)", ids)
	}
	s.informers.sweep()
	if len(told) != 1 {
		t.Errorf("a second sweep told %v again", told)
	}
}
