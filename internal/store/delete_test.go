package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Issue 23: a DELETE of an unknown id cost two label-selected LISTs on the main client
// (16 clients of them slowed real creates from ~10 ms to ~350 ms). Nothing of the id in
// the caches: its reads go through the rate-limited Confirm client only.
func TestDeleteOfUnknownIDReadsThroughConfirm(t *testing.T) {
	s, main, confirm := fakeStore(t)
	startCaches(t, s)
	if err := s.Delete(context.Background(), "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete = %v, want ErrNotFound", err)
	}
	if got := requestsFor(main); len(got) > 0 {
		t.Errorf("the main client was asked %v", got)
	}
	if got, want := requestsFor(confirm), []string{"list deployments", "list services", "get leases"}; !slices.Equal(got, want) {
		t.Errorf("the Confirm client was asked %v, want %v", got, want)
	}
}

// Issue 23: DELETE never read the record. While a create held it but had not made its
// Deployment, DELETE answered 404 (or deleted the Service and answered 204), and the
// create then finished. Here the create's Deployment appears right after DELETE's first
// look: DELETE waits for it, then deletes the container.
func TestDeleteWaitsForACreateInProgress(t *testing.T) {
	s, main, _ := fakeStore(t, recordLease(time.Second, false), service("web-s", "i1"))
	startCaches(t, s)
	lists := 0
	main.PrependReactor("list", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		if lists == 1 { // DELETE's first look: the create commits its Deployment just after
			if err := main.Tracker().Add(deployment("web", "i1")); err != nil {
				t.Error(err)
			}
			return true, &appsv1.DeploymentList{}, nil
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Delete(ctx, "x"); err != nil {
		t.Fatalf("Delete = %v, want success", err)
	}
	if lists < 2 {
		t.Errorf("DELETE looked %d times: it did not wait for the create", lists)
	}
	deps, _ := main.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	svcs, _ := main.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if len(deps.Items)+len(svcs.Items) > 0 {
		t.Errorf("left running: %d Deployments, %d Services", len(deps.Items), len(svcs.Items))
	}
	l, err := main.CoordinationV1().Leases(ns).Get(ctx, container.RecordName("x"), metav1.GetOptions{})
	if rec, ok := container.RecordOf(l, "x"); err != nil || !ok || !rec.Owed {
		t.Errorf("the record is not marked DELETED owed: %+v %v", rec, err)
	}
}

// A create still in progress at its deadline: 409 with Retry-After (when the record
// counts as abandoned), and nothing deleted.
func TestDeleteDuringACreatePastItsDeadlineIs409(t *testing.T) {
	s, main, _ := fakeStore(t, recordLease(createTimeout+5*time.Second, false), service("web-s", "i1"))
	startCaches(t, s)
	err := s.Delete(context.Background(), "x")
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindConflict || se.RetryAfter != 15 {
		t.Fatalf("Delete = %v, want a conflict with Retry-After 15", err)
	}
	if _, err := main.CoreV1().Services(ns).Get(context.Background(), "web-s", metav1.GetOptions{}); err != nil {
		t.Errorf("the create's Service was deleted: %v", err)
	}
}

// An abandoned create (its record older than twice the create timeout, no Deployment):
// DELETE deletes its Service and its record; 204 with a Service, 404 without.
func TestDeleteCleansUpAnAbandonedCreate(t *testing.T) {
	for _, withService := range []bool{true, false} {
		objs := []runtime.Object{recordLease(time.Hour, false)}
		if withService {
			objs = append(objs, service("web-s", "i1"))
		}
		s, main, _ := fakeStore(t, objs...)
		startCaches(t, s)
		err := s.Delete(context.Background(), "x")
		if withService && err != nil || !withService && !errors.Is(err, ErrNotFound) {
			t.Errorf("with a Service %v: Delete = %v", withService, err)
		}
		ctx := context.Background()
		if _, err := main.CoordinationV1().Leases(ns).Get(ctx, container.RecordName("x"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("with a Service %v: the record is still there (%v)", withService, err)
		}
		if svcs, _ := main.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); len(svcs.Items) > 0 {
			t.Errorf("the abandoned create's Service is still there")
		}
	}
}
