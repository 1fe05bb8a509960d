package store_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// missOfALiveContainer is a GET miss whose container lives at the apiserver but is not
// in this store's caches yet: its Deployment is made while the store's watch of
// Deployments is held, and the watch is let go only once the Confirm client's list of
// the id's Deployments has answered. slow makes that list take the whole ConfirmWait
// (its answer is read, then held until ConfirmWait is over).
// It returns what the Get answered, the Deployment's name and how long the Get took.
func missOfALiveContainer(t *testing.T, record, slow bool) (container.Observed, string, time.Duration, error) {
	t.Helper()
	f := newFixture(t)
	f.start(t)
	if record {
		makeRecord(t, f.ns, "x", "i1", false)
	}
	f.deployments.close()
	d := deploymentOf(t, f.ns, "x", "i1")
	f.confirm.on(request(http.MethodGet, f.ns, "deployments", ""), nil, func(r *http.Request, resp *http.Response) error {
		defer f.deployments.open()
		if !slow {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if dl, ok := r.Context().Deadline(); ok {
			time.Sleep(time.Until(dl) + 100*time.Millisecond)
		} else {
			t.Error("the Confirm client's list has no deadline")
		}
		return err
	})
	start := time.Now()
	o, err := f.s.Get(context.Background(), "x")
	return o, d.Name, time.Since(start), err
}

// Issue 23: a miss with no record answered 404 without asking for Deployments: a
// container without a record (the reference provider's, or its record deleted by hand)
// that this replica's cache did not show yet got a 404.
func TestMissWithoutRecordAsksForTheDeployment(t *testing.T) {
	o, name, _, err := missOfALiveContainer(t, false, false)
	if err != nil || o.Deployment == nil || o.Deployment.Name != name {
		t.Fatalf("Get = %+v, %v; want the container (Deployment %s)", o, err, name)
	}
}

// Issue 23: the limiter wait, the reads and the wait for the cache shared one
// ConfirmWait: reads that took it all left the cache no time, and a live container got
// a 503. The wait for the cache has its own bound (ConfirmCacheWait).
func TestMissWaitsForTheCacheOnItsOwnBound(t *testing.T) {
	o, name, took, err := missOfALiveContainer(t, true, true)
	if err != nil || o.Deployment == nil || o.Deployment.Name != name {
		t.Fatalf("Get = %+v, %v; want the container (Deployment %s)", o, err, name)
	}
	if took < store.ConfirmWait {
		t.Errorf("the Get took %s: the Confirm client's list did not take the whole ConfirmWait", took)
	}
}
