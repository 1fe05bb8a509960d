package store_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Issue 23: a record deleted between EnsureRecord's create (AlreadyExists) and its read
// (the reporter deleting it once its DELETED was delivered) was not created again, so a
// DELETE marking it owed answered 500. It is created again. The record is deleted just
// before the store's read of it is sent.
func TestEnsureRecordCreatesAgainARecordDeletedMeanwhile(t *testing.T) {
	f := newFixture(t)
	makeRecord(t, f.ns, "x", "i1", false)
	records := testenv.Cluster(t).Client.CoreV1().ConfigMaps(f.ns)
	f.main.on(request(http.MethodGet, f.ns, "configmaps", container.RecordName("x")), func() {
		if err := records.Delete(context.Background(), container.RecordName("x"), metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}, nil)
	if err := f.s.EnsureRecord(context.Background(), "x", "i1", true); err != nil {
		t.Fatalf("EnsureRecord = %v", err)
	}
	l, err := records.Get(context.Background(), container.RecordName("x"), metav1.GetOptions{})
	if rec, ok := container.RecordOf(l, "x"); err != nil || !ok || !rec.Owed {
		t.Errorf("the record is not there, owed: %+v %v", rec, err)
	}
}

// Issue 23: the uninstall decided on the Owed flag of the record it had listed, not on
// the record as it is when deleted: one marked owed since kept its finalizer, and
// stayed. Here the record is marked owed right after the uninstall's listing.
func TestReleaseTakesOffAFinalizerAddedSinceTheListing(t *testing.T) {
	f := newFixture(t)
	makeRecord(t, f.ns, "x", "i1", false)
	records := testenv.Cluster(t).Client.CoreV1().ConfigMaps(f.ns)
	f.main.on(request(http.MethodGet, f.ns, "configmaps", ""), nil, func(*http.Request, *http.Response) error {
		_, err := records.Patch(context.Background(), container.RecordName("x"), types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":["`+container.RecordFinalizer+`"]}}`), metav1.PatchOptions{})
		if err != nil {
			t.Error(err)
		}
		return nil
	})
	rep, err := store.Release(context.Background(), f.client, f.ns)
	if err != nil || !slices.Equal(rep.Records, []string{"x"}) {
		t.Fatalf("Release = %+v, %v", rep, err)
	}
	if l, err := records.Get(context.Background(), container.RecordName("x"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the record stayed (finalizers %v, %v): the finalizer it has now was not taken off", l.Finalizers, err)
	}
}
