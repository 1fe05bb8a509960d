package store_test

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// keyedObjects are id's objects as a create with Idempotency-Key key and spec digest
// digest asks for them.
func keyedObjects(id, key, digest string) container.Objects {
	o := objectsOf(id)
	o.Request = container.Request{Key: key, Digest: digest}
	return o
}

type created struct {
	obs container.Observed
	err error
}

func createAsync(f *fixture, id string, objs container.Objects) <-chan created {
	ch := make(chan created, 1)
	go func() {
		obs, err := f.s.Create(context.Background(), id, objs)
		ch <- created{obs, err}
	}()
	return ch
}

// twoReplicas are two started stores in one fresh namespace.
func twoReplicas(t *testing.T) (ns string, a, b *fixture) {
	t.Helper()
	ns = testenv.Namespace(t)
	a, b = newFixtureIn(t, ns), newFixtureIn(t, ns)
	a.start(t)
	b.start(t)
	return ns, a, b
}

// waitRecord waits until id's record exists at the apiserver.
func waitRecord(t *testing.T, ns, id string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "the record", func() error {
		if _, _, rec := what(t, ns, id); !rec {
			return errors.New("no record yet")
		}
		return nil
	})
}

// A create sent again with its Idempotency-Key through another replica while the first
// is still in flight (its Deployment's create held) waits for it and answers with the
// container it made: one container, both answers the same.
func TestSameRequestWhileTheFirstIsInFlight(t *testing.T) {
	ns, a, b := twoReplicas(t)
	const id = "same"
	objs := keyedObjects(id, "event-1", "d1")
	release := make(chan struct{})
	a.main.on(request(http.MethodPost, ns, "deployments", ""), func() { <-release }, nil)
	first := createAsync(a, id, objs)
	waitRecord(t, ns, id)
	second := createAsync(b, id, objs)
	select {
	case r := <-second:
		t.Fatalf("the retry answered before the first made the container: %+v %v", r.obs, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("first %v, retry %v", r1.err, r2.err)
	}
	if r1.obs.Deployment.Name != r2.obs.Deployment.Name || r2.obs.Service == nil || r1.obs.Service.Name != r2.obs.Service.Name {
		t.Errorf("first made %s, the retry answered %+v", r1.obs.Deployment.Name, r2.obs)
	}
	if deps, svcs, _ := what(t, ns, id); len(deps) != 1 || len(svcs) != 1 {
		t.Errorf("deployments %v, services %v", deps, svcs)
	}
	// Once done, again on either replica: the same container, at once.
	for _, f := range []*fixture{a, b} {
		if obs, err := f.s.Create(context.Background(), id, objs); err != nil || obs.Deployment.Name != r1.obs.Deployment.Name {
			t.Errorf("again: %+v %v", obs, err)
		}
	}
	// The key with another spec: refused, nothing changed.
	_, err := b.s.Create(context.Background(), id, keyedObjects(id, "event-1", "d2"))
	if se := (*kubeerr.Error)(nil); !errors.As(err, &se) || se.Kind != kubeerr.KindKeyReused {
		t.Errorf("another spec with the key: %v", err)
	}
	if deps, _, _ := what(t, ns, id); len(deps) != 1 {
		t.Errorf("deployments %v", deps)
	}
}

// The first attempt fails half-way (its Deployment's answer lost, as when the
// apiserver goes away mid-request) while the retry waits on another replica: the first
// keeps its record (503: retry with the key), since whether its objects were made is
// unknown, and the retry answers with what it made: one container, no object taken
// back after a 201.
func TestSameRequestAfterTheFirstFailedHalfWay(t *testing.T) {
	ns, a, b := twoReplicas(t)
	const id = "half"
	objs := keyedObjects(id, "event-2", "d1")
	release := make(chan struct{})
	a.main.on(request(http.MethodPost, ns, "deployments", ""), func() { <-release },
		func(*http.Request, *http.Response) error { return syscall.ECONNRESET })
	first := createAsync(a, id, objs)
	waitRecord(t, ns, id)
	second := createAsync(b, id, objs)
	time.Sleep(300 * time.Millisecond)
	close(release)
	r1, r2 := <-first, <-second
	if se := (*kubeerr.Error)(nil); !errors.As(r1.err, &se) || se.Kind != kubeerr.KindUnavailable {
		t.Fatalf("the first attempt: %+v %v", r1.obs, r1.err)
	}
	if r2.err != nil {
		t.Fatalf("the retry: %v", r2.err)
	}
	time.Sleep(2 * time.Second) // what a wrong take-back would have removed by now
	deps, svcs, rec := what(t, ns, id)
	if len(deps) != 1 || len(svcs) != 1 || !rec || deps[0] != r2.obs.Deployment.Name || svcs[0] != r2.obs.Service.Name {
		t.Errorf("deployments %v, services %v, record %v; the retry answered %s", deps, svcs, rec, r2.obs.Deployment.Name)
	}
}
