package store_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// A create the apiserver refuses (here an invalid Deployment: no image) leaves nothing:
// its record goes at once, with no DELETED owed (nothing was made to report), and the
// Service it made is deleted by the garbage collector. A retry finds the id free.
func TestRefusedCreateLeavesNothing(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	objs := objectsOf("x")
	objs.Deployment.Spec.Template.Spec.Containers[0].Image = ""
	_, err := f.s.Create(context.Background(), "x", objs)
	var se *kubeerr.Error
	if !errors.As(err, &se) || se.Kind != kubeerr.KindInvalid {
		t.Fatalf("Create = %v, want KindInvalid", err)
	}
	waitFor(t, "nothing is left of the id", func() bool {
		deps, svcs, record := what(t, f.ns, "x")
		return len(deps) == 0 && len(svcs) == 0 && !record
	})
	if _, err := f.s.Create(context.Background(), "x", objectsOf("x")); err != nil {
		t.Errorf("a retry of the create = %v, want it made", err)
	}
}

// A create whose Deployment's answer is lost (the apiserver made it): the record goes at
// once (no DELETED is owed: DCM got no 201), a retry finds the id free, and the garbage
// collector deletes the Deployment and the Service the failed create made.
func TestCreateWhoseDeploymentAnswerIsLost(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	f.main.on(request(http.MethodPost, f.ns, "deployments", ""), nil, func(*http.Request, *http.Response) error {
		return errors.New("connection reset by peer (the test's lost answer)")
	})
	if _, err := f.s.Create(context.Background(), "x", objectsOf("x")); err == nil {
		t.Fatal("Create succeeded; want its error")
	}
	if _, _, record := what(t, f.ns, "x"); record {
		t.Error("the failed create's record is still there")
	}
	o, err := f.s.Create(context.Background(), "x", objectsOf("x"))
	if err != nil {
		t.Fatalf("a retry of the create = %v, want it made", err)
	}
	waitFor(t, "the garbage collector deletes what the failed create made", func() bool {
		deps, svcs, _ := what(t, f.ns, "x")
		return slices.Equal(deps, []string{o.Deployment.Name}) && slices.Equal(svcs, []string{o.Service.Name})
	})
}

// A create of an id whose previous container is deleted and not yet reported: 409
// being deleted (not "already exists"), with Retry-After; two requests.
func TestCreateOfAnIDBeingDeleted(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	if _, err := f.s.Create(context.Background(), "x", objectsOf("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Delete(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	stop := f.main.journal(f.ns)
	_, err := f.s.Create(context.Background(), "x", objectsOf("x"))
	var se *kubeerr.Error
	if !errors.As(err, &se) || se.Kind != kubeerr.KindDeleting || se.RetryAfter == 0 {
		t.Fatalf("Create = %v, want KindDeleting with a Retry-After", err)
	}
	checkRequests(t, "the refused create", stop(), "POST configmaps", "GET configmaps/"+container.RecordName("x"))
	// A live record is another container: "already exists".
	if _, err := f.s.Create(context.Background(), "y", objectsOf("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Create(context.Background(), "y", objectsOf("y")); !errors.As(err, &se) || se.Kind != kubeerr.KindConflict {
		t.Errorf("a second create of a live id = %v, want KindConflict", err)
	}
}

// A DELETE on a replica whose cache has not seen the container (made a moment ago
// through another replica) reads the record at the apiserver and deletes it; the
// garbage collector deletes the Deployment it did not know of, at the latest once the
// record goes. The test plays the controller (DELETED delivered: the finalizer off):
// foreground propagation alone does not make the collector delete the dependents
// while the record is kept, since none blocks its owner's deletion (record.go, OwnedBy);
// a dependent the collector looks at after it has let go of the record's
// foregroundDeletion finalizer sees a live owner (a clean-clone CI run timed out here).
func TestDeleteOfAContainerTheCacheHasNotSeen(t *testing.T) {
	ns := testenv.Namespace(t)
	a, b := newFixtureIn(t, ns), newFixtureIn(t, ns)
	a.s.ReserveWindow = 200 * time.Millisecond
	a.start(t)
	b.start(t)
	a.records.close()
	a.deployments.close()
	if _, err := b.s.Create(context.Background(), "x", objectsOf("x")); err != nil {
		t.Fatal(err)
	}
	stop, stopConfirm := a.main.journal(ns), a.confirm.journal(ns)
	if err := a.s.Delete(context.Background(), "x"); err != nil {
		t.Fatalf("Delete = %v, want 204", err)
	}
	checkRequests(t, "main client", stop(), "DELETE configmaps/"+container.RecordName("x")+" foreground")
	checkRequests(t, "Confirm client", stopConfirm(), "GET configmaps/"+container.RecordName("x"))
	a.records.open()
	a.deployments.open()
	snap, err := a.s.Confirmed(context.Background(), "x")
	if err != nil || snap.Record == nil || !snap.Record.Terminating {
		t.Fatalf("Confirmed = %+v, %v; want the record terminating", snap, err)
	}
	if err := a.s.Finalize(context.Background(), *snap.Record); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the garbage collector deletes the Deployment and the Service", func() bool {
		deps, svcs, _ := what(t, ns, "x")
		return len(deps) == 0 && len(svcs) == 0
	})
}

// The uninstall (Release) lets go of the records and leaves the workloads running,
// with no ownerReference left on them.
func TestReleaseOrphansTheWorkloads(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	o, err := f.s.Create(context.Background(), "x", objectsOf("x"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := store.Release(context.Background(), f.client, f.ns)
	if err != nil || !slices.Equal(rep.Records, []string{"x"}) {
		t.Fatalf("Release = %+v, %v", rep, err)
	}
	cs := testenv.Cluster(t).Client
	waitFor(t, "the record goes and the workloads are orphaned", func() bool {
		_, _, record := what(t, f.ns, "x")
		d, derr := cs.AppsV1().Deployments(f.ns).Get(context.Background(), o.Deployment.Name, metav1.GetOptions{})
		s, serr := cs.CoreV1().Services(f.ns).Get(context.Background(), o.Service.Name, metav1.GetOptions{})
		return !record && derr == nil && serr == nil && len(d.OwnerReferences) == 0 && len(s.OwnerReferences) == 0
	})
	time.Sleep(2 * time.Second) // the garbage collector would have deleted them by now
	if _, err := cs.AppsV1().Deployments(f.ns).Get(context.Background(), o.Deployment.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("the Deployment was deleted")
	}
}
