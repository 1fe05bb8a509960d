package app_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Two replicas behind one Service: a client's GET may reach the replica that did not
// make the write. A 404 must be authoritative: B never says "not found" for a container
// A has already answered 201 for, however far B's cache lags.
func TestGetOnTheOtherReplicaIsNever404AfterCreate(t *testing.T) {
	ns := testenv.Namespace(t)
	a := startProvider(t, ns)
	b := startProvider(t, ns)
	a.waitSynced(t)
	b.waitSynced(t)
	notFound := 0
	var waited time.Duration
	for i := range 40 {
		id := fmt.Sprintf("both-%d", i)
		create(t, a, id, spec("both", "nginx"))
		start := time.Now()
		r := do(t, http.MethodGet, b.URL+containers+"/"+id, nil)
		waited += time.Since(start)
		switch r.Status {
		case http.StatusOK:
		case http.StatusNotFound:
			notFound++
		default:
			t.Fatalf("GET on B: %d %s", r.Status, r.Body)
		}
	}
	if notFound > 0 {
		t.Errorf("B answered 404 for %d of 40 containers A had created", notFound)
	}
	t.Logf("GET on B right after the create on A: %s on average", (waited / 40).Round(100*time.Microsecond))
	// An unknown id: one apiserver read (the record), then an authoritative 404.
	before := b.Requests.Load()
	if r := do(t, http.MethodGet, b.URL+containers+"/never-made", nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown id: %d %s", r.Status, r.Body)
	}
	if n := b.Requests.Load() - before; n < 1 || n > 3 {
		t.Errorf("confirming a miss made %d apiserver requests", n)
	}
}

// unreachable makes every new request of the provider's Kubernetes clients fail as if
// the apiserver were down while down is set; watches already open go on, so the caches
// keep what they hold, as in a real outage before the watches notice.
func unreachable(down *atomic.Bool) providerOpt {
	return func(_ *config.Config, rc *rest.Config) {
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &faultyTransport{rt: rt, down: down} })
	}
}

type faultyTransport struct {
	rt   http.RoundTripper
	down *atomic.Bool
}

func (f *faultyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.down.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return f.rt.RoundTrip(r)
}

func (f *faultyTransport) WrappedRoundTripper() http.RoundTripper { return f.rt }

// Found by make chaos (seed 11): during an apiserver restart a replica answered 404 for a
// container created a moment before, because its cache had not seen it and the miss
// could not be confirmed. A miss that cannot be confirmed is a 503, never a 404; what
// the cache holds is still served.
func TestUnconfirmableMissIs503(t *testing.T) {
	ns := testenv.Namespace(t)
	down := &atomic.Bool{}
	p := startProvider(t, ns, unreachable(down))
	p.waitSynced(t)
	create(t, p, "known", spec("known", "nginx"))
	down.Store(true)
	r := do(t, http.MethodGet, p.URL+containers+"/never-made", nil)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Errorf("unknown id with the apiserver down: %d (Retry-After %q) %s, want 503 with Retry-After",
			r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	if r := do(t, http.MethodGet, p.URL+containers+"/known", nil); r.Status != http.StatusOK {
		t.Errorf("a cached container with the apiserver down: %d %s", r.Status, r.Body)
	}
	down.Store(false)
	if r := do(t, http.MethodGet, p.URL+containers+"/never-made", nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown id with the apiserver back: %d %s", r.Status, r.Body)
	}
}

// A record no Deployment joined: while it is young (a create in progress on another
// replica) a GET waits for the cache, then answers 503 with Retry-After; once it is
// older than twice the create timeout (its creator died, or its Deployment was deleted
// by hand), 404 at once (make chaos, seed 11, answered 503 after 2 s for a container
// deleted by hand).
func TestRecordWithoutDeploymentIs404(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns, withEnv("SP_K8S_CREATE_TIMEOUT=2s"))
	p.waitSynced(t)
	cs := testenv.Cluster(t).Client
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), container.NewRecord("bare", container.Request{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the controller settles it, unless the test ends first
		_, _ = cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), container.RecordName("bare"), types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if r := do(t, http.MethodGet, p.URL+containers+"/bare", nil); r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Errorf("GET of an id with a young bare record: %d (Retry-After %q) %s, want 503", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	time.Sleep(4 * time.Second) // twice the create timeout, by the apiserver's timestamps
	start := time.Now()
	if r := do(t, http.MethodGet, p.URL+containers+"/bare", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET of an id with an old bare record: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > store.ConfirmWait {
		t.Errorf("the 404 took %s: it waited for the cache", d)
	}
}

// A container whose Deployment was deleted by hand a moment ago (its record still live:
// the controller is about to settle it) is a 404 at once on a replica whose cache saw the
// Deployment go; it waited 2 s, then answered 503 (make chaos, seed 114630519, with
// the ownership model's first cut).
func TestDeploymentDeletedByHandIs404AtOnce(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns, withEnv("SP_MONITOR_DEBOUNCE_MS=2000")) // the controller waits: the record stays live
	p.waitSynced(t)
	create(t, p, "byhand", spec("web", "nginx"))
	deleteByHand(t, ns, "byhand")
	testenv.Eventually(t, 10*time.Second, "the cache sees the Deployment go", func() error {
		if snap := p.App.Store().Snapshot("byhand"); len(snap.Deployments) > 0 || snap.Record == nil || snap.Record.Terminating {
			return fmt.Errorf("snapshot %+v", snap)
		}
		return nil
	})
	start := time.Now()
	if r := do(t, http.MethodGet, p.URL+containers+"/byhand", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET: %d %s, want 404", r.Status, r.Body)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the 404 took %s: it waited for the cache", took)
	}
}
