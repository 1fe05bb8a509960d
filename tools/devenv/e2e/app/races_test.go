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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

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

// listOf matches a LIST (not a watch) of resource selecting container id.
func listOf(resource, id string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		q := r.URL.Query()
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/"+resource) && q.Get("watch") != "true" &&
			strings.Contains(q.Get("labelSelector"), container.LabelInstanceID+"="+id)
	}
}

// racingCreate makes, with the test's client, what a create of id (incarnation inc)
// makes after its record: its Service, then its Deployment (or only the Service).
func racingCreate(t *testing.T, ns, id, inc string, withDeployment bool) error {
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	labels := container.SystemLabels(id)
	labels[container.LabelIncarnation] = inc
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "racing-", Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil || !withDeployment {
		return err
	}
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "racing-", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	return err
}

// reserve makes id's record the way a create reserves the id (container.NewRecord).
func reserve(t *testing.T, ns, id, inc string) {
	t.Helper()
	if _, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
		container.NewRecord(id, inc, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
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

// A DELETE while a create holds the record but has not made its Deployment: the create
// makes its Service and Deployment right after DELETE's first look at the Deployments.
// On the code before issue 23, DELETE (which never read the record) answered 404, or
// deleted the Service and answered 204, and the Deployment ran on: a container DCM was
// told is gone. Now DELETE waits for the create and deletes what it made.
func TestDeleteDuringACreateInProgress(t *testing.T) {
	ns := testenv.Namespace(t)
	const id, inc = "racing", "inc-1"
	var hookErr error
	p := startProvider(t, ns, interceptor(listOf("deployments", id), func() error {
		hookErr = racingCreate(t, ns, id, inc, true)
		return nil
	}))
	p.waitSynced(t)
	reserve(t, ns, id, inc)
	r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil)
	if hookErr != nil {
		t.Fatalf("the racing create: %v", hookErr)
	}
	if r.Status != http.StatusNoContent {
		t.Errorf("DELETE during a create: %d %s, want 204", r.Status, r.Body)
	}
	if deps, svcs := running(t, ns, id); len(deps)+len(svcs) > 0 {
		t.Errorf("after the DELETE, still running: Deployments %v, Services %v", deps, svcs)
	}
}

// A create still without its Deployment at its deadline (SP_K8S_CREATE_TIMEOUT after
// its record): DELETE waited for it that long, then answers 409 with Retry-After, and
// deletes nothing (the create's Service stays until the create or its rollback ends).
func TestDeleteOfACreatePastItsDeadlineIs409(t *testing.T) {
	ns := testenv.Namespace(t)
	const id, inc = "slow", "inc-1"
	p := startProvider(t, ns, withEnv("SP_K8S_CREATE_TIMEOUT=2s"))
	p.waitSynced(t)
	reserve(t, ns, id, inc)
	if err := racingCreate(t, ns, id, inc, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil)
	expectProblem(t, r, http.StatusConflict, "already-exists")
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("no Retry-After on the 409: %q", ra)
	}
	if d, ok := r.JSON["detail"].(string); !ok || !strings.Contains(d, "a create of this container id is in progress") {
		t.Errorf("detail %q does not say a create is in progress", r.JSON["detail"])
	}
	if waited := time.Since(start); waited < 500*time.Millisecond { // creationTimestamp is whole seconds: the age reads up to 1 s more
		t.Errorf("the 409 came after %s: DELETE did not wait for the create", waited)
	}
	if _, svcs := running(t, ns, id); len(svcs) != 1 {
		t.Errorf("the create's Service: %v, want it untouched", svcs)
	}
}

// A create whose Deployment (or Service) the apiserver committed but whose answer was
// lost (here: the RoundTripper sends the POST, then returns an error instead of the
// answer). The rollback finds what the create made by incarnation and deletes it, then
// the record; before issue 23 the object ran on, with no record. A lost Service answer
// also stops the create before its Deployment: the Deployment is made last.
func TestLostCreateAnswerIsRolledBack(t *testing.T) {
	for _, lost := range []string{"deployments", "services"} {
		t.Run(lost, func(t *testing.T) {
			ns := testenv.Namespace(t)
			const id = "lost"
			post := func(resource string) func(*http.Request) bool {
				return func(r *http.Request) bool {
					return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/"+resource)
				}
			}
			var deploymentPosts atomic.Int64
			count := func(_ *config.Config, rc *rest.Config) {
				rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
					return testenv.RoundTripFunc{RT: rt, F: func(r *http.Request) (*http.Response, error) {
						if post("deployments")(r) {
							deploymentPosts.Add(1)
						}
						return rt.RoundTrip(r)
					}}
				})
			}
			p := startProvider(t, ns, count, interceptor(post(lost), func() error { return errors.New("the answer was lost on the way back") }))
			p.waitSynced(t)
			r := do(t, http.MethodPost, p.URL+containers+"?id="+id, spec("lost", "nginx", withPorts(port(80, "internal"))))
			if r.Status < 500 {
				t.Fatalf("create with a lost answer: %d %s, want a 5xx", r.Status, r.Body)
			}
			if deps, svcs := running(t, ns, id); len(deps)+len(svcs) > 0 {
				t.Errorf("after the rollback, still running: Deployments %v, Services %v", deps, svcs)
			}
			_, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(id), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("the record after the rollback: %v, want none", err)
			}
			if lost == "services" && deploymentPosts.Load() > 0 {
				t.Error("a Deployment was created after the Service's create failed: the Deployment must come last")
			}
			// The id is free again.
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
// (16 clients of them slowed real creates from ~10 ms to ~350 ms). Its reads go through
// the rate-limited Confirm client: with the main client held shut, it still answers 404.
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
// which reserved its id too late, rolls back (503): nothing of the id runs. On the code
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
		t.Errorf("the create answered %d, want 503 (reserved after the window; rolled back): %s", c.Status, c.Body)
	}
	testenv.Eventually(t, 20*time.Second, "nothing of the id at the apiserver", func() error {
		deps, svcs := running(t, ns, id)
		_, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(id), metav1.GetOptions{})
		if len(deps)+len(svcs) > 0 || !apierrors.IsNotFound(err) {
			return fmt.Errorf("deployments %v, services %v, record err %v", deps, svcs, err)
		}
		return nil
	})
}

// A DELETE whose mark (the record's DELETED owed) reached the apiserver but whose answer
// was lost answers 503, and takes the mark off again: the container still runs, so its
// record must not owe a DELETED as if it were gone (the chaos run, seed 7, with lost
// answers: a running container's record owed its DELETED for good). A retried DELETE
// then deletes it.
func TestFailedDeleteLeavesTheContainerAsItWas(t *testing.T) {
	ns := testenv.Namespace(t)
	const id = "half-deleted"
	var armed atomic.Bool
	lose := interceptor(func(r *http.Request) bool {
		return armed.Load() && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/configmaps/"+container.RecordName(id))
	}, func() error { return errors.New("connection reset (the test lost the answer)") })
	p := startProvider(t, ns, lose)
	p.waitSynced(t)
	if r := do(t, http.MethodPost, p.URL+containers+"?id="+id, spec("web", "nginx")); r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	armed.Store(true)
	if r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("DELETE with its mark's answer lost answered %d, want 503: %s", r.Status, r.Body)
	}
	rec, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := container.RecordOf(rec, id); got.Owed {
		t.Errorf("the record of a container still running owes a DELETED: finalizers %v", rec.Finalizers)
	}
	if deps, _ := running(t, ns, id); len(deps) != 1 {
		t.Errorf("live Deployments %v, want the container's one", deps)
	}
	if r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil); r.Status != http.StatusNoContent {
		t.Errorf("the retried DELETE answered %d, want 204: %s", r.Status, r.Body)
	}
}
