package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// An abandoned create: its record older than twice the create timeout (its replica died
// mid-create), no Deployment. DELETE deletes its Service and its record: 204 (nil) with
// a Service, 404 without (no container was ever there for DCM to know of). The store's
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
			var want error // 204
			if !withService {
				want = store.ErrNotFound
			}
			if err := f.s.Delete(context.Background(), "x"); !errors.Is(err, want) {
				t.Errorf("Delete = %v, want %v", err, want)
			}
			if _, svcs, record := what(t, f.ns, "x"); len(svcs) > 0 || record {
				t.Errorf("after the DELETE: Services %v, record %v; want neither", svcs, record)
			}
		})
	}
}
