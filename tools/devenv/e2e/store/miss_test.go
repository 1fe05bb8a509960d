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

// A GET miss whose container lives at the apiserver but is not in this store's caches
// yet (another replica made it a moment ago): its Deployment is made while the store's
// watch of Deployments is held, and the watch is let go once the Confirm client's read
// of the record has answered. slow makes that read take the whole ConfirmWait (its
// answer is read, then held until ConfirmWait is over). It returns what the Get
// answered, the Deployment's name and how long the Get took.
func missOfALiveContainer(t *testing.T, slow bool) (container.Observed, string, time.Duration, error) {
	t.Helper()
	f := newFixture(t)
	f.start(t)
	f.deployments.close()
	rec := makeRecord(t, f.ns, "x")
	d := deploymentOf(t, f.ns, "x", rec.UID)
	waitFor(t, "the cache shows the record", func() bool { return f.s.Snapshot("x").Record != nil })
	f.confirm.on(request(http.MethodGet, f.ns, "configmaps", container.RecordName("x")), nil, func(r *http.Request, resp *http.Response) error {
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
			t.Error("the Confirm client's read has no deadline")
		}
		return err
	})
	start := time.Now()
	o, err := f.s.Get(context.Background(), "x")
	return o, d.Name, time.Since(start), err
}

// A miss whose record lives waits for this replica's cache rather than answering 404.
func TestMissOfALiveRecordWaitsForTheCache(t *testing.T) {
	o, name, _, err := missOfALiveContainer(t, false)
	if err != nil || o.Deployment == nil || o.Deployment.Name != name {
		t.Fatalf("Get = %+v, %v; want the container (Deployment %s)", o, err, name)
	}
}

// Issue 23: the limiter wait, the reads and the wait for the cache shared one
// ConfirmWait: reads that took it all left the cache no time, and a live container got
// a 503. The wait for the cache has its own bound (ConfirmCacheWait).
func TestMissWaitsForTheCacheOnItsOwnBound(t *testing.T) {
	o, name, took, err := missOfALiveContainer(t, true)
	if err != nil || o.Deployment == nil || o.Deployment.Name != name {
		t.Fatalf("Get = %+v, %v; want the container (Deployment %s)", o, err, name)
	}
	if took < store.ConfirmWait {
		t.Errorf("the Get took %s: the Confirm client's read did not take the whole ConfirmWait", took)
	}
}
