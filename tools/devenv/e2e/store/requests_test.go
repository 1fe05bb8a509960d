package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// The exact apiserver requests of each path (issue 35). A test here fails when a path
// makes one more; docs/architecture.md lists the same.

func checkRequests(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: requests %q, want %q", what, got, want)
	}
}

func TestRequestsOfACreate(t *testing.T) {
	for _, withService := range []bool{true, false} {
		name := map[bool]string{true: "with a Service", false: "without a Service"}[withService]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.start(t)
			objs := objectsOf("x")
			if !withService {
				objs.Service = nil
			}
			// The store's watch of Deployments is held: what a GET shows of the
			// Deployment comes from the create's own answer (Store.wrote).
			f.deployments.close()
			stop := f.main.journal(f.ns)
			stopConfirm := f.confirm.journal(f.ns)
			o, err := f.s.Create(context.Background(), "x", objs)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"POST configmaps", "POST deployments"}
			if withService {
				want = append(want, "POST services")
			}
			checkRequests(t, "create", stop(), want...)
			stop = f.main.journal(f.ns)
			got, err := f.s.Get(context.Background(), "x")
			if err != nil || got.Deployment == nil || got.Deployment.Name != o.Deployment.Name || (got.Service != nil) != withService {
				t.Errorf("a GET right after the create = %+v, %v; want the container just made", got, err)
			}
			checkRequests(t, "a GET right after it", stop())
			checkRequests(t, "the Confirm client", stopConfirm())
		})
	}
}

func TestRequestsOfADelete(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	o, err := f.s.Create(context.Background(), "x", objectsOf("x"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache shows the container", func() bool { return f.s.Snapshot("x").Live() != nil })
	stop := f.main.journal(f.ns)
	if err := f.s.Delete(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	checkRequests(t, "delete", stop(), "DELETE configmaps/"+container.RecordName("x")+" background", "DELETE deployments/web-* background", "DELETE services/web-*")
	if _, err := f.s.Get(context.Background(), "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a GET right after the DELETE = %v, want 404", err)
	}
	cs := testenv.Cluster(t).Client
	rec, err := cs.CoreV1().ConfigMaps(f.ns).Get(context.Background(), container.RecordName("x"), metav1.GetOptions{})
	if r, _ := container.RecordOf(rec, "x"); err != nil || !r.Terminating || !r.Owed {
		t.Errorf("the record: %+v %v; want it terminating, its DELETED owed (finalizers %v)", r, err, rec.Finalizers)
	}
	waitFor(t, "the Service is gone", func() bool {
		_, err := cs.CoreV1().Services(f.ns).Get(context.Background(), o.Service.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// The controller's work after it: a confirmation (one read: the record is
	// terminating, so its Deployments do not matter), then the finalizer off.
	stop = f.main.journal(f.ns)
	snap, err := f.s.Confirmed(context.Background(), "x")
	if err != nil || snap.Record == nil || !snap.Record.Terminating {
		t.Fatalf("Confirmed = %+v, %v", snap, err)
	}
	if err := f.s.Finalize(context.Background(), *snap.Record); err != nil {
		t.Fatal(err)
	}
	checkRequests(t, "the controller after a DELETE", stop(), "GET configmaps/"+container.RecordName("x"), "PATCH configmaps/"+container.RecordName("x"))
	waitFor(t, "the record goes", func() bool {
		_, _, record := what(t, f.ns, "x")
		return !record
	})
}

func TestRequestsOfUnknownIDs(t *testing.T) {
	f := newFixture(t)
	f.s.ReserveWindow = 300 * time.Millisecond
	f.start(t)
	stop, stopConfirm := f.main.journal(f.ns), f.confirm.journal(f.ns)
	if _, err := f.s.Get(context.Background(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GET = %v, want 404", err)
	}
	checkRequests(t, "GET of an unknown id (main client)", stop())
	checkRequests(t, "GET of an unknown id (Confirm client)", stopConfirm(), "GET configmaps/"+container.RecordName("nope"))

	stop, stopConfirm = f.main.journal(f.ns), f.confirm.journal(f.ns)
	began := time.Now()
	if err := f.s.Delete(context.Background(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DELETE = %v, want 404", err)
	}
	if took := time.Since(began); took < f.s.ReserveWindow || took > f.s.ReserveWindow+2*time.Second {
		t.Errorf("the DELETE of an unknown id took %s; want the reservation window (%s) and little more", took, f.s.ReserveWindow)
	}
	checkRequests(t, "DELETE of an unknown id (main client)", stop())
	checkRequests(t, "DELETE of an unknown id (Confirm client)", stopConfirm(), "GET configmaps/"+container.RecordName("nope"))
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A create sent again with its Idempotency-Key, the first one done: the record's create
// (refused) and one read of it; the container from the caches.
func TestRequestsOfACreateSentAgain(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	objs := keyedObjects("x", "event-1", "d1")
	o, err := f.s.Create(context.Background(), "x", objs)
	if err != nil {
		t.Fatal(err)
	}
	stop := f.main.journal(f.ns)
	again, err := f.s.Create(context.Background(), "x", objs)
	if err != nil || again.Deployment.Name != o.Deployment.Name || again.Service == nil {
		t.Fatalf("sent again: %+v, %v", again, err)
	}
	checkRequests(t, "create sent again", stop(), "POST configmaps", "GET configmaps/"+container.RecordName("x"))
}
