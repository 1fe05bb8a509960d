package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Issue 23 item 2: DELETE and create are ordered per id. These drive the interleavings
// with the real control plane: the objects a racing create would make are made by the
// test at the moment the race needs them, and the provider's requests to the apiserver
// are intercepted (a wrapping RoundTripper) where an answer must be lost.

// interceptor runs hook on the provider's first request to the apiserver that match
// accepts, after the apiserver has answered it and before the provider reads the
// answer; a non-nil error from hook replaces the answer (lost on the way back).
func interceptor(match func(*http.Request) bool, hook func() error) providerOpt {
	var once sync.Once
	return func(_ *config.Config, rc *rest.Config) {
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return testenv.RoundTripFunc{RT: rt, F: func(r *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(r)
				if err != nil || !match(r) {
					return resp, err
				}
				var herr error
				hit := false
				once.Do(func() { hit, herr = true, hook() })
				if hit && herr != nil {
					resp.Body.Close()
					return nil, herr
				}
				return resp, err
			}}
		})
	}
}

// running lists what of id is live at the apiserver: Deployments not being deleted,
// and Services.
func running(t *testing.T, ns, id string) (deps, svcs []string) {
	t.Helper()
	cs := testenv.Cluster(t).Client
	sel := metav1.ListOptions{LabelSelector: container.InstanceSelector(id)}
	dl, err := cs.AppsV1().Deployments(ns).List(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dl.Items {
		if d.DeletionTimestamp == nil {
			deps = append(deps, d.Name)
		}
	}
	sl, err := cs.CoreV1().Services(ns).List(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sl.Items {
		svcs = append(svcs, s.Name)
	}
	return deps, svcs
}

// nothingLeft waits until nothing of id is at the apiserver: no Deployment, Service or
// record (the record goes once its DELETED is delivered).
func nothingLeft(t *testing.T, ns, id string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "nothing of "+id+" at the apiserver", func() error {
		deps, svcs := running(t, ns, id)
		_, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(id), metav1.GetOptions{})
		if len(deps)+len(svcs) > 0 || !apierrors.IsNotFound(err) {
			return fmt.Errorf("deployments %v, services %v, record err %v", deps, svcs, err)
		}
		return nil
	})
}

// before runs hook before the provider's first request that match accepts is sent.
func before(match func(*http.Request) bool, hook func()) providerOpt {
	var once sync.Once
	return func(_ *config.Config, rc *rest.Config) {
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return testenv.RoundTripFunc{RT: rt, F: func(r *http.Request) (*http.Response, error) {
				if match(r) {
					once.Do(hook)
				}
				return rt.RoundTrip(r)
			}}
		})
	}
}

func post(ns, resource string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/"+resource)
	}
}

// A DELETE while a create holds its record and has not made its Deployment yet (the
// DELETE is sent just before the create's Deployment): the DELETE deletes the record
// (204), the create's Deployment comes after, owned by a deleted record, and the
// garbage collector deletes it. DCM is told DELETED, and nothing of the id is left.
func TestDeleteDuringACreateInProgress(t *testing.T) {
	const id = "racing"
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	var del response
	var url atomic.Value
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"), before(post(ns, "deployments"), func() {
		del = do(t, http.MethodDelete, url.Load().(string)+containers+"/"+id, nil)
	}))
	url.Store(p.URL)
	p.waitSynced(t)
	c := do(t, http.MethodPost, p.URL+containers+"?id="+id, spec("web", "nginx", withPorts(port(80, "internal"))))
	if del.Status != http.StatusNoContent {
		t.Errorf("DELETE during the create: %d %s, want 204", del.Status, del.Body)
	}
	if c.Status != http.StatusCreated {
		t.Errorf("the create: %d %s, want 201 (it made its objects; the DELETE had come first)", c.Status, c.Body)
	}
	if r := do(t, http.MethodGet, p.URL+containers+"/"+id, nil); r.Status != http.StatusNotFound {
		t.Errorf("GET after both: %d, want 404", r.Status)
	}
	events.waitStatus(id, "DELETED", "", 30*time.Second)
	nothingLeft(t, ns, id)
}

// A create whose Deployment (or Service) the apiserver committed but whose answer was
// lost (the RoundTripper sends the POST, then returns an error instead of the answer):
// the create answers 5xx and deletes its record, keeping its DELETED owed (the
// Deployment may exist, and may have been reported); the garbage collector deletes
// what the record owned, the controller delivers the DELETED, and the id is free again.
func TestLostCreateAnswerIsCleanedUp(t *testing.T) {
	for _, lost := range []string{"deployments", "services"} {
		t.Run(lost, func(t *testing.T) {
			ns := testenv.Namespace(t)
			const id = "lost"
			p := startProvider(t, ns, interceptor(post(ns, lost), func() error { return errors.New("the answer was lost on the way back") }))
			p.waitSynced(t)
			r := do(t, http.MethodPost, p.URL+containers+"?id="+id, spec("lost", "nginx", withPorts(port(80, "internal"))))
			if r.Status < 500 {
				t.Fatalf("create with a lost answer: %d %s, want a 5xx", r.Status, r.Body)
			}
			nothingLeft(t, ns, id)
			create(t, p, id, spec("lost", "nginx"))
		})
	}
}

// gate is a rate limiter for the provider's main client that lets nothing through while
// closed: a request that needs the main client then waits.
type gate struct{ closed atomic.Bool }

func (g *gate) TryAccept() bool { return !g.closed.Load() }
func (g *gate) Accept() {
	for g.closed.Load() {
		time.Sleep(5 * time.Millisecond)
	}
}
func (g *gate) Stop()        {}
func (g *gate) QPS() float32 { return 1000 }
func (g *gate) Wait(ctx context.Context) error {
	for g.closed.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// Issue 23: a DELETE of an unknown id cost two label-selected LISTs on the main client
// (16 clients of them slowed real creates from ~10 ms to ~350 ms). Its one read goes
// through the rate-limited Confirm client: with the main client held shut, it still
// answers 404.
func TestDeleteOfAnUnknownIDSparesTheMainClient(t *testing.T) {
	ns := testenv.Namespace(t)
	g := &gate{}
	// A short reservation window: a DELETE that finds nothing answers once it passed.
	p := startProvider(t, ns, func(c *config.Config, rc *rest.Config) { rc.RateLimiter, c.Kubernetes.ReserveWindow = g, time.Second })
	p.waitSynced(t)
	g.closed.Store(true)
	defer g.closed.Store(false)
	client := &http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodDelete, p.URL+containers+"/never-made", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("DELETE of an unknown id with the main client shut: %v (it waited for the main client)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE of an unknown id: %d, want 404", resp.StatusCode)
	}
}

// A DELETE through one replica while a create of the same id, begun a moment before
// through the other, is still reserving its id (its record's create is held on the way
// to the apiserver, as a slow or restarting apiserver holds it): the DELETE finds
// nothing. It answers 404 only once the reservation window has passed, and the create,
// which reserved its id too late, takes its record back (503): nothing of the id runs. On the code
// before, the DELETE answered 404 at once and the create then made a running container
// (the chaos run's seed 7: DCM's clean-up DELETE after its create timeout).
func TestDeleteAfterACreateStillReservingItsID(t *testing.T) {
	ns := testenv.Namespace(t)
	const id = "slow-reserve"
	window := func(c *config.Config, _ *rest.Config) { c.Kubernetes.ReserveWindow = time.Second }
	var armed atomic.Bool
	reached, deleted := make(chan struct{}), make(chan struct{})
	var once sync.Once
	holdRecord := func(_ *config.Config, rc *rest.Config) {
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return testenv.RoundTripFunc{RT: rt, F: func(r *http.Request) (*http.Response, error) {
				if armed.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/configmaps") {
					once.Do(func() {
						close(reached)
						select { // until the DELETE through the other replica has answered
						case <-deleted:
						case <-time.After(30 * time.Second):
						}
					})
				}
				return rt.RoundTrip(r)
			}}
		})
	}
	a := startProvider(t, ns, window)
	b := startProvider(t, ns, window, holdRecord)
	a.waitSynced(t)
	b.waitSynced(t)
	// The election's lock is a ConfigMap too: made (POST) before the hold is armed, so
	// the POST held is the record's.
	testenv.Eventually(t, 30*time.Second, "a leader (the lock ConfigMap made)", func() error {
		if !a.App.Leading() && !b.App.Leading() {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})

	armed.Store(true)
	created := make(chan response, 1)
	go func() { created <- do(t, http.MethodPost, b.URL+containers+"?id="+id, spec("web", "nginx")) }()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the create never sent its record")
	}
	start := time.Now()
	del := do(t, http.MethodDelete, a.URL+containers+"/"+id, nil)
	close(deleted)
	if del.Status != http.StatusNotFound {
		t.Fatalf("DELETE answered %d, want 404 (nothing of the id was at the apiserver): %s", del.Status, del.Body)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("DELETE answered 404 after %s, before the reservation window (1s) had passed", took)
	}
	c := <-created
	if c.Status != http.StatusServiceUnavailable {
		t.Errorf("the create answered %d, want 503 (reserved after the window; took back): %s", c.Status, c.Body)
	}
	nothingLeft(t, ns, id)
}

// A DELETE whose record's deletion reached the apiserver but whose answer was lost
// answers 503; the container is deleted all the same (a deletion timestamp never goes
// back): DCM is told DELETED, nothing is left, and a retried DELETE answers 404.
func TestDeleteWhoseAnswerIsLost(t *testing.T) {
	const id = "half-deleted"
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	var armed atomic.Bool
	lose := interceptor(func(r *http.Request) bool {
		return armed.Load() && r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/configmaps/"+container.RecordName(id))
	}, func() error { return errors.New("connection reset (the test lost the answer)") })
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"), lose)
	p.waitSynced(t)
	create(t, p, id, spec("web", "nginx"))
	armed.Store(true)
	if r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("DELETE with its answer lost answered %d, want 503: %s", r.Status, r.Body)
	}
	events.waitStatus(id, "DELETED", "", 30*time.Second)
	nothingLeft(t, ns, id)
	if r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil); r.Status != http.StatusNotFound {
		t.Errorf("the retried DELETE answered %d, want 404: %s", r.Status, r.Body)
	}
}
