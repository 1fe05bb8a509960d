package store_test

import (
	"context"
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
