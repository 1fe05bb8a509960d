package store_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// An abandoned create: its record older than twice the create timeout (its replica died
// mid-create, or its Deployment was deleted by hand), no Deployment. DELETE deletes its
// Service and marks the record owed (never deletes it: its DELETED may not be sent yet),
// 204 (nil) with or without a Service. The store's
// clock is a minute ahead, so the record is that old. (Through the HTTP API this cannot
// be driven deterministically: the provider's status reporter cleans up an abandoned
// create by itself once it is that old, and races the DELETE.)
func TestDeleteCleansUpAnAbandonedCreate(t *testing.T) {
	for _, withService := range []bool{true, false} {
		name := "without Service"
		if withService {
			name = "with Service"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.s.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(time.Minute))
			f.start(t)
			makeRecord(t, f.ns, "x", "i1", false)
			if withService {
				svc := objectsOf("x").ForIncarnation("i1").Service
				if _, err := testenv.Cluster(t).Client.CoreV1().Services(f.ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.s.Delete(context.Background(), "x"); err != nil {
				t.Errorf("Delete = %v, want nil (204)", err)
			}
			if _, svcs, _ := what(t, f.ns, "x"); len(svcs) > 0 {
				t.Errorf("after the DELETE: Services %v; want none", svcs)
			}
			// The record stays, marked owed: it may be a container deleted by hand whose
			// DELETED is not sent yet; the reporter sends it and deletes the record.
			l, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(f.ns).Get(context.Background(), container.RecordName("x"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rec, _ := container.RecordOf(l, "x"); !rec.Owed {
				t.Errorf("the record does not owe a DELETED: finalizers %v", l.Finalizers)
			}
		})
	}
}

// A DELETE that fails on an apiserver outage after its mark (the chaos run, seed
// 1475124511: "deleting Deployment: EOF" on an apiserver restart) must not leave the
// running container's record owing a DELETED: the mark comes off once the apiserver
// answers again, though the outage outlasts the first try to take it off (5 s).
func TestFailedDeleteUnmarksAfterAnOutage(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	if _, err := f.s.Create(context.Background(), "x", objectsOf("x")); err != nil {
		t.Fatal(err)
	}
	deleteDeployment := func(r *http.Request) bool {
		return r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/namespaces/"+f.ns+"/deployments/")
	}
	f.main.on(deleteDeployment, func() { f.main.down.Store(true) }, nil)
	if err := f.s.Delete(context.Background(), "x"); err == nil {
		t.Fatal("Delete = nil; want the outage's error")
	}
	owed := func() bool {
		t.Helper()
		l, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(f.ns).Get(context.Background(), container.RecordName("x"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := container.RecordOf(l, "x")
		return rec.Owed
	}
	if !owed() {
		t.Fatal("the failed DELETE left no mark: the outage came too early to test anything")
	}
	time.Sleep(7 * time.Second) // longer than the first try
	f.main.down.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for owed() {
		if time.Now().After(deadline) {
			t.Fatal("20 s after the outage the running container's record still owes a DELETED")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if deps, _, _ := what(t, f.ns, "x"); len(deps) != 1 {
		t.Errorf("Deployments %v; want the one the failed DELETE left", deps)
	}
}
