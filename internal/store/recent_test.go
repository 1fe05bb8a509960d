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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/cached"
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
// any informer has shown it (Store.wrote), and a DELETE's answer (the record
// terminating) hides the container at once.
func TestWritesAreReadBackBeforeTheInformers(t *testing.T) {
	s := unstarted(t)
	rec, dep, svc := createdX(t)
	if snap := s.Snapshot("x"); !snap.Empty() {
		t.Fatalf("an unstarted store shows %+v", snap)
	}
	s.wrote(recordKind, "x", rec)
	s.wrote(deploymentKind, "x", dep)
	s.wrote(serviceKind, "x", svc)
	o, ok := s.observed("x")
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
	s.wrote(recordKind, "x", gone)
	if _, ok := s.observed("x"); ok {
		t.Error("after the DELETE's answer the container is still shown")
	}
	if r := s.Snapshot("x").Record; r == nil || !r.Terminating || !r.Owed {
		t.Errorf("the record after the DELETE: %+v, want it terminating, owed", r)
	}
	// An older write never hides a newer one (resourceVersions compare).
	s.wrote(recordKind, "x", rec)
	if r := s.Snapshot("x").Record; r == nil || !r.Terminating {
		t.Errorf("an older answer read over a newer one: %+v", r)
	}
}

// The informer's deletion of an object drops this replica's write of it: a read does
// not bring back what the informer has seen go.
func TestAnInformerDeleteDropsTheWrite(t *testing.T) {
	s := unstarted(t)
	rec, dep, _ := createdX(t)
	s.wrote(recordKind, "x", rec)
	s.wrote(deploymentKind, "x", dep)
	cached, err := cached.Of(dep)
	if err != nil {
		t.Fatal(err)
	}
	s.handler(deploymentKind).OnDelete(cached)
	if snap := s.Snapshot("x"); len(snap.Deployments) != 0 || snap.Live() != nil {
		t.Errorf("after the informer's delete: %+v", snap.Deployments)
	}
}

// The cached objects are runtime.Objects (as client-go's caches expect), read-only: a copy is the object itself, setters change nothing, and what is
// not kept reads as unset.
func TestCachedObjectsAreReadOnly(t *testing.T) {
	rec, dep, svc := createdX(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-abcde-1", Namespace: "ns", Labels: container.SystemLabels("x"), ResourceVersion: "9"}}
	for _, obj := range []runtime.Object{rec, dep, svc, pod} {
		c, err := cached.Of(obj)
		if err != nil {
			t.Fatal(err)
		}
		ro := c.(runtime.Object)
		if ro.DeepCopyObject() != ro || ro.GetObjectKind() != schema.EmptyObjectKind {
			t.Errorf("%T: a copy is not itself, or it has a kind", c)
		}
		m := c.(metav1.Object)
		name, rv := m.GetName(), m.GetResourceVersion()
		m.SetName("other")
		m.SetResourceVersion("1")
		m.SetLabels(map[string]string{"a": "b"})
		m.SetUID(types.UID("u"))
		m.SetNamespace("other")
		m.SetGenerateName("g")
		m.SetGeneration(3)
		m.SetSelfLink("s")
		m.SetCreationTimestamp(metav1.Now())
		m.SetDeletionTimestamp(nil)
		m.SetDeletionGracePeriodSeconds(nil)
		m.SetAnnotations(nil)
		m.SetFinalizers(nil)
		m.SetOwnerReferences(nil)
		m.SetManagedFields(nil)
		if m.GetName() != name || m.GetResourceVersion() != rv || m.GetNamespace() != "ns" {
			t.Errorf("%T changed by its setters", c)
		}
		if m.GetGenerateName() != "" || m.GetGeneration() != 0 || m.GetSelfLink() != "" || m.GetAnnotations() != nil ||
			m.GetFinalizers() != nil || m.GetOwnerReferences() != nil || m.GetManagedFields() != nil || m.GetDeletionGracePeriodSeconds() != nil {
			t.Errorf("%T: what is not kept does not read as unset", c)
		}
		if container.InstanceID(m.GetLabels()) != "x" {
			t.Errorf("%T: labels %v", c, m.GetLabels())
		}
		_ = m.GetCreationTimestamp()
		_ = m.GetDeletionTimestamp()
		_ = m.GetUID()
	}
}

func TestLookupOf(t *testing.T) {
	if lookupOf(nil) != answered || lookupOf(apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")) != absent || lookupOf(io.EOF) != failed {
		t.Error("lookupOf")
	}
}
