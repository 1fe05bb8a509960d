package store

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Issue 23: a record deleted between EnsureRecord's create (AlreadyExists) and its read
// (the reporter deleting it once its DELETED was delivered) was not created again, so a
// DELETE marking it owed answered 500. It is created again.
func TestEnsureRecordCreatesAgainARecordDeletedMeanwhile(t *testing.T) {
	s, main, _ := fakeStore(t, recordLease(time.Minute, false))
	gets := 0
	main.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if gets++; gets == 1 { // deleted just before the read
			if err := main.Tracker().Delete(leasesGVR, ns, container.RecordName("x")); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	if err := s.EnsureRecord(context.Background(), "x", "i1", true); err != nil {
		t.Fatalf("EnsureRecord = %v", err)
	}
	l, err := main.CoordinationV1().Leases(ns).Get(context.Background(), container.RecordName("x"), metav1.GetOptions{})
	if rec, ok := container.RecordOf(l, "x"); err != nil || !ok || !rec.Owed {
		t.Errorf("the record is not there, owed: %+v %v", rec, err)
	}
}

// Issue 23: the uninstall decided on the Owed flag of the record it had listed, not on
// the record as it is when deleted: one marked owed since kept its finalizer, and stayed.
func TestReleaseTakesOffAFinalizerAddedSinceTheListing(t *testing.T) {
	_, main, _ := fakeStore(t, recordLease(time.Minute, false))
	// The reporter marks the record owed between the uninstall's listing and its read.
	main.PrependReactor("list", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := main.Tracker().List(leasesGVR, coordinationv1.SchemeGroupVersion.WithKind("Lease"), ns)
		if err != nil {
			return true, nil, err
		}
		l := obj.(*coordinationv1.LeaseList).DeepCopy()
		owed := l.Items[0].DeepCopy()
		owed.Finalizers = []string{container.RecordFinalizer}
		if err := main.Tracker().Update(leasesGVR, owed, ns); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	rep, err := Release(context.Background(), main, ns)
	if err != nil || !slices.Equal(rep.Records, []string{"x"}) {
		t.Fatalf("Release = %+v, %v", rep, err)
	}
	var finalizerOff bool
	for _, a := range main.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			l := u.GetObject().(*coordinationv1.Lease)
			finalizerOff = finalizerOff || !slices.Contains(l.Finalizers, container.RecordFinalizer)
		}
	}
	if !finalizerOff {
		t.Error("the finalizer the record has now was not taken off: the record would stay")
	}
}
