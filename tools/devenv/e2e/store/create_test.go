package store_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Issue 23: a create trusted an empty cache about the id's workload: a live Deployment
// of the id without a record (record deleted by hand, or the reference provider's)
// that the cache did not show yet got a second container with its id. The apiserver is
// asked every time. Here the store's caches are not even started: they show nothing.
func TestCreateAsksTheAPIServerForALiveDeployment(t *testing.T) {
	f := newFixture(t)
	theirs := deploymentOf(t, f.ns, "x", "theirs")
	posts := f.main.counter(func(r *http.Request) bool {
		return r.Method == http.MethodPost && !strings.HasSuffix(r.URL.Path, "/configmaps")
	})
	_, err := f.s.Create(context.Background(), "x", objectsOf("x"))
	var se *store.Error
	if !errors.As(err, &se) || se.Kind != store.KindConflict || !strings.Contains(se.Message, "already exists") {
		t.Fatalf("Create = %v, want the 409 of an id taken", err)
	}
	if n := posts(); n > 0 {
		t.Errorf("%d objects created next to a live Deployment of the id", n)
	}
	deps, svcs, record := what(t, f.ns, "x")
	if !slices.Equal(deps, []string{theirs.Name}) || len(svcs) > 0 {
		t.Errorf("after the 409: Deployments %v, Services %v; want only %s", deps, svcs, theirs.Name)
	}
	if record {
		t.Error("the record was not rolled back")
	}
}

// Issue 23: a create ignored a record being deleted. One owing a DELETED is the previous
// container's, whose DELETED is not delivered yet: 409 with Retry-After and that
// message. One owing nothing (here: held by someone else's finalizer) is going: the
// create waits for it and succeeds.
func TestCreateFacingARecordBeingDeleted(t *testing.T) {
	// deleting makes x's record and deletes it: a finalizer holds it, being deleted.
	deleting := func(t *testing.T, ns string, owed bool) {
		t.Helper()
		var extra []string
		if !owed {
			extra = []string{"example.com/keep"}
		}
		makeRecord(t, ns, "x", "i1", owed, extra...)
		if err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Delete(context.Background(),
			container.RecordName("x"), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("owed", func(t *testing.T) {
		f := newFixture(t)
		deleting(t, f.ns, true)
		_, err := f.s.Create(context.Background(), "x", objectsOf("x"))
		var se *store.Error
		if !errors.As(err, &se) || se.Kind != store.KindConflict || se.RetryAfter == 0 ||
			!strings.Contains(se.Message, "previous container with this id is still being deleted") {
			t.Fatalf("Create = %v, want the 409 of a previous container still being deleted", err)
		}
		if deps, svcs, _ := what(t, f.ns, "x"); len(deps)+len(svcs) > 0 {
			t.Errorf("made Deployments %v, Services %v", deps, svcs)
		}
	})
	t.Run("owing nothing", func(t *testing.T) {
		f := newFixture(t)
		f.start(t) // a create returns once its objects are in the caches
		deleting(t, f.ns, false)
		readRecord := request(http.MethodGet, f.ns, "configmaps", container.RecordName("x"))
		reads := f.main.counter(readRecord)
		// The finalizer goes once the create has read the record being deleted.
		f.main.on(readRecord, nil, func(*http.Request, *http.Response) error {
			dropFinalizers(t, f.ns, "x")
			return nil
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := f.s.Create(ctx, "x", objectsOf("x")); err != nil {
			t.Fatalf("Create = %v, want success", err)
		}
		if n := reads(); n < 2 {
			t.Errorf("the create read the record %d times: it did not wait for it to go", n)
		}
		if deps, svcs, record := what(t, f.ns, "x"); len(deps) != 1 || len(svcs) != 1 || !record {
			t.Errorf("after the create: Deployments %v, Services %v, record %v", deps, svcs, record)
		}
	})
}
