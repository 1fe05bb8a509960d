package store

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// objectsOfX is what a create of container x makes (a Deployment and a Service, names
// generated).
func objectsOfX() container.Objects {
	d := deployment("", "")
	d.GenerateName, d.UID, d.Labels = "web-", "", container.SystemLabels("x")
	v := service("", "")
	v.GenerateName, v.UID, v.Labels = "web-", "", container.SystemLabels("x")
	return container.Objects{Deployment: d, Service: v}
}

// generateNames makes the fake clientset name objects from generateName, as the
// apiserver does, and counts the creates per resource.
func generateNames(c *fake.Clientset, creates map[string]int) {
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		creates[a.GetResource().Resource]++
		if o, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && o.GetName() == "" && o.GetGenerateName() != "" {
			o.SetName(o.GetGenerateName() + "abcde")
			o.SetUID(types.UID("uid-" + a.GetResource().Resource))
		}
		return false, nil, nil
	})
}

// Issue 23: the apiserver committed an object whose answer the create never got (a
// timeout, a broken connection): rollback deleted only what the answers named, so the
// object stayed, with no record: a container DCM was told had failed. Rollback finds
// what the create made by its incarnation. (The Service is made first, the Deployment
// last: the Deployment's create is the commit point.)
func TestRollbackFindsWhatALostAnswerMade(t *testing.T) {
	for _, lost := range []string{"deployments", "services"} {
		t.Run(lost, func(t *testing.T) {
			s, main, _ := fakeStore(t)
			creates := map[string]int{}
			main.PrependReactor("create", lost, func(a k8stesting.Action) (bool, runtime.Object, error) {
				// The apiserver commits it; the answer is lost on the way back.
				if err := main.Tracker().Create(a.GetResource(), a.(k8stesting.CreateAction).GetObject(), ns); err != nil {
					t.Error(err)
				}
				return true, nil, errors.New("read tcp: connection reset by peer")
			})
			generateNames(main, creates)
			_, err := s.Create(context.Background(), "x", objectsOfX())
			if err == nil {
				t.Fatal("the create succeeded")
			}
			ctx := context.Background()
			deps, _ := main.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			svcs, _ := main.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if len(deps.Items)+len(svcs.Items) > 0 {
				t.Errorf("left behind: %d Deployments, %d Services", len(deps.Items), len(svcs.Items))
			}
			if _, err := main.CoordinationV1().Leases(ns).Get(ctx, container.RecordName("x"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the record is still there (%v)", err)
			}
			if lost == "services" && creates["deployments"] > 0 {
				t.Error("a Deployment was created after the Service failed: the Deployment must come last")
			}
		})
	}
}

// Issue 23: a create trusted an empty cache about the id's workload: a live Deployment
// of the id without a record (record deleted by hand, or the reference provider's)
// that the cache did not show yet got a second container with its id. The apiserver is
// asked every time.
func TestCreateAsksTheAPIServerForALiveDeployment(t *testing.T) {
	s, main, _ := fakeStore(t, deployment("theirs", ""))
	creates := map[string]int{}
	generateNames(main, creates)
	// The caches are not started: they show nothing.
	_, err := s.Create(context.Background(), "x", objectsOfX())
	if !errors.Is(err, errTaken) {
		t.Fatalf("Create = %v, want errTaken", err)
	}
	if creates["deployments"]+creates["services"] > 0 {
		t.Errorf("created %v next to a live Deployment of the id", creates)
	}
	if _, err := main.CoordinationV1().Leases(ns).Get(context.Background(), container.RecordName("x"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the record was not rolled back (%v)", err)
	}
}

// Issue 23: claimID ignored a record being deleted. One owing a DELETED is the previous
// container's, whose DELETED is not delivered yet: 409 with Retry-After and that
// message. One owing nothing is going: the create waits for it and succeeds.
func TestCreateFacingARecordBeingDeleted(t *testing.T) {
	deleting := func(owed bool) *coordinationv1.Lease {
		l := recordLease(time.Minute, owed)
		now := metav1.NewTime(t0)
		l.DeletionTimestamp = &now
		if !owed {
			l.Finalizers = []string{"example.com/keep"}
		}
		return l
	}
	t.Run("owed", func(t *testing.T) {
		s, _, _ := fakeStore(t, deleting(true))
		_, err := s.Create(context.Background(), "x", objectsOfX())
		var se *Error
		if !errors.As(err, &se) || se.Kind != KindConflict || se.RetryAfter == 0 || se.Message != errPreviousDeleting.Message {
			t.Fatalf("Create = %v, want errPreviousDeleting", err)
		}
	})
	t.Run("owing nothing", func(t *testing.T) {
		s, main, _ := fakeStore(t, deleting(false))
		startCaches(t, s) // a create returns once its objects are in them
		creates := map[string]int{}
		generateNames(main, creates)
		gets := 0
		main.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if gets++; gets == 2 { // the finalizer goes while the create waits
				if err := main.Tracker().Delete(leasesGVR, ns, container.RecordName("x")); err != nil {
					t.Error(err)
				}
			}
			return false, nil, nil
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.Create(ctx, "x", objectsOfX()); err != nil {
			t.Fatalf("Create = %v, want success", err)
		}
		if gets < 2 {
			t.Errorf("the create read the record %d times: it did not wait", gets)
		}
	})
}
