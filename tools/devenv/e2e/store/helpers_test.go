package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is a store.Store in a fresh namespace of the shared control plane, on clients
// whose requests the test can hook (main: the store's client; confirm: its Confirm
// client, rate limited as the provider's is).
type fixture struct {
	ns      string
	s       *store.Store
	client  kubernetes.Interface // the store's main client (hooked), for Release
	main    *hooks
	confirm *hooks
	// deployments and records hold the store's watch of Deployments (of records)
	// while closed: its cache sees no change of them until it is opened.
	deployments, records *gate
}

// newFixture builds the store (its caches not started: see start).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureIn(t, testenv.Namespace(t))
}

// newFixtureIn is newFixture in namespace ns (several stores in one namespace: replicas).
func newFixtureIn(t *testing.T, ns string) *fixture {
	t.Helper()
	env := testenv.Cluster(t)
	f := &fixture{ns: ns, main: &hooks{}, confirm: &hooks{}, deployments: &gate{}, records: &gate{}}
	mainRC := rest.CopyConfig(env.Config)
	mainRC.Wrap(f.main.wrap(func(r *http.Request) *gate {
		switch {
		case isWatch(r) && strings.HasSuffix(r.URL.Path, "/deployments"):
			return f.deployments
		case isWatch(r) && strings.HasSuffix(r.URL.Path, "/configmaps"):
			return f.records
		}
		return nil
	}))
	confirmRC := rest.CopyConfig(env.Config)
	confirmRC.RateLimiter = store.NewConfirmLimiter()
	confirmRC.Wrap(f.confirm.wrap(nil))
	var err error
	if f.client, err = kubernetes.NewForConfig(mainRC); err != nil {
		t.Fatal(err)
	}
	if f.s, err = store.New(f.client, f.ns, slog.New(slog.NewTextHandler(testLog{t}, nil))); err != nil {
		t.Fatal(err)
	}
	if f.s.Confirm, err = kubernetes.NewForConfig(confirmRC); err != nil {
		t.Fatal(err)
	}
	f.s.CreateTimeout = 10 * time.Second
	return f
}

// start starts the store's informers and waits for them to sync; they stop when the
// test ends.
func (f *fixture) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { f.deployments.open(); f.records.open(); cancel(); f.s.Shutdown() })
	f.s.Start(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if !f.s.WaitForSync(wctx) {
		t.Fatal("the store's caches did not sync")
	}
}

// hook runs at the first request that match accepts (after it was added): before,
// ahead of sending it; after, once the apiserver answered it and before the store reads
// the answer (it may replace resp.Body). A non-nil error from after replaces the answer
// (lost on the way back).
type hook struct {
	match  func(*http.Request) bool
	before func()
	after  func(*http.Request, *http.Response) error
	fired  bool
}

// hooks are the hooks of one client.
type hooks struct {
	mu   sync.Mutex
	list []*hook
	// down: every request but a watch fails without being sent, as when the apiserver
	// is away (set from a hook's before: that request fails too).
	down atomic.Bool
}

// errAway is what a request gets while the hooks are down.
var errAway = errors.New("EOF (the test's apiserver outage)")

// on adds a hook; before and after may be nil.
func (h *hooks) on(match func(*http.Request) bool, before func(), after func(*http.Request, *http.Response) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.list = append(h.list, &hook{match: match, before: before, after: after})
}

// take returns the hook for r, marked fired, or nil.
func (h *hooks) take(r *http.Request) *hook {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.list {
		if !k.fired && k.match(r) {
			k.fired = true
			return k
		}
	}
	return nil
}

// wrap is the client's transport wrapper: it runs the hooks, and puts the watch
// responses that gateOf names behind their gate.
func (h *hooks) wrap(gateOf func(*http.Request) *gate) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return testenv.RoundTripFunc{RT: rt, F: func(r *http.Request) (*http.Response, error) {
			k := h.take(r)
			if k != nil && k.before != nil {
				k.before()
			}
			if h.down.Load() && !isWatch(r) {
				return nil, errAway
			}
			if gateOf != nil && isWatch(r) && r.URL.Query().Get("sendInitialEvents") != "true" {
				if g := gateOf(r); g != nil && g.expired.CompareAndSwap(true, false) {
					return expired(r), nil
				}
			}
			resp, err := rt.RoundTrip(r)
			if err != nil {
				return resp, err
			}
			if k != nil && k.after != nil {
				if herr := k.after(r, resp); herr != nil {
					resp.Body.Close()
					return nil, herr
				}
			}
			if gateOf != nil {
				if g := gateOf(r); g != nil {
					resp.Body = gatedBody{ReadCloser: resp.Body, g: g}
				}
			}
			return resp, nil
		}}
	}
}

// gate holds what a watch brings while closed: a read of the watch's body that got data
// returns it only once the gate is open. (Held after the read, not before: the watch
// is always in the middle of a read, waiting for the next event.)
type gate struct {
	mu     sync.Mutex
	closed chan struct{} // nil: open
	broken bool          // held reads fail, their data lost
	// expired: the next watch (not a list's) answers 410, so the reflector lists anew.
	expired atomic.Bool
}

// relist ends the held watch with its data lost and answers the next watch 410, as
// when a watch breaks and its resourceVersion is compacted away: the informer lists
// anew and sees none of the changes made while it was held.
func (g *gate) relist() {
	g.expired.Store(true)
	g.mu.Lock()
	g.broken = true
	g.mu.Unlock()
	g.open()
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == nil {
		g.closed = make(chan struct{})
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

// wait waits while the gate is closed; false when the held read is to fail.
func (g *gate) wait() bool {
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch == nil {
		return true
	}
	<-ch
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.broken
}

type gatedBody struct {
	io.ReadCloser
	g *gate
}

func (b gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.g.wait() {
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// expired is the apiserver's answer to a watch from a compacted resourceVersion.
func expired(r *http.Request) *http.Response {
	body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}`
	return &http.Response{StatusCode: http.StatusGone, Status: "410 Gone", Request: r, Body: io.NopCloser(strings.NewReader(body)),
		Header: http.Header{"Content-Type": {"application/json"}}, ProtoMajor: 1, ProtoMinor: 1}
}

func isWatch(r *http.Request) bool { return r.URL.Query().Get("watch") == "true" }

// request matches a request of method to resource in namespace ns, not a watch: a
// collection (name "") or one object.
func request(method, ns, resource, name string) func(*http.Request) bool {
	path := "/namespaces/" + ns + "/" + resource
	if name != "" {
		path += "/" + name
	}
	return func(r *http.Request) bool {
		return r.Method == method && strings.HasSuffix(r.URL.Path, path) && !isWatch(r)
	}
}

// journal records the requests the client sends from now on, but watches, each as
// "METHOD resource" or "METHOD resource/name" with a generated name's random part as
// "*", and, for a DELETE, its propagation ("DELETE configmaps/dcm-container-x
// foreground"); stop returns them sorted (requests sent at once come in any order).
func (h *hooks) journal(ns string) (stop func() []string) {
	var mu sync.Mutex
	var got []string
	on := true
	h.on(func(r *http.Request) bool {
		if isWatch(r) {
			return false
		}
		entry := r.Method + " " + strings.TrimPrefix(r.URL.Path[strings.Index(r.URL.Path, "/namespaces/"+ns+"/")+len("/namespaces/"+ns+"/"):], "")
		if i := strings.LastIndex(entry, "/"); i > 0 && !strings.Contains(entry[i:], "dcm-container-") {
			if j := strings.LastIndex(entry, "-"); j > i {
				entry = entry[:j+1] + "*"
			}
		}
		if r.Method == http.MethodDelete && r.Body != nil && r.GetBody != nil {
			if b, err := r.GetBody(); err == nil {
				raw, _ := io.ReadAll(b) // JSON or protobuf: the policy's name is in either
				for _, p := range []metav1.DeletionPropagation{metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan} {
					if bytes.Contains(raw, []byte(p)) {
						entry += " " + strings.ToLower(string(p))
					}
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if on {
			got = append(got, entry)
		}
		return false
	}, nil, nil)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		on = false
		slices.Sort(got)
		return slices.Clone(got)
	}
}

// objectsOf is what a create of container id makes: a Deployment and a Service, their
// names generated.
func objectsOf(id string) container.Objects {
	l := container.SystemLabels(id)
	return container.Objects{
		Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Labels: l},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: l},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: l},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				},
			},
		},
		Service: &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Labels: l},
			Spec:       corev1.ServiceSpec{Selector: l, Ports: []corev1.ServicePort{{Port: 80}}},
		},
	}
}

// deploymentOf makes, with the test's client, a Deployment of container id owned by the
// record with UID inc, the way another replica would have.
func deploymentOf(t *testing.T, ns, id string, inc types.UID) *appsv1.Deployment {
	t.Helper()
	d := objectsOf(id).OwnedBy(container.RecordName(id), inc).Deployment
	d, err := testenv.Cluster(t).Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// what lists the names of id's Deployments (live or not), Services and record at the
// apiserver.
func what(t *testing.T, ns, id string) (deps, svcs []string, record bool) {
	t.Helper()
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: container.InstanceSelector(id)}
	dl, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dl.Items {
		deps = append(deps, d.Name)
	}
	sl, err := cs.CoreV1().Services(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sl.Items {
		svcs = append(svcs, s.Name)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, container.RecordName(id), metav1.GetOptions{})
	return deps, svcs, err == nil
}

// makeRecord writes id's record with the test's client, as a create does, and takes
// every finalizer off again when the test ends, so its namespace can go.
func makeRecord(t *testing.T, ns, id string) *corev1.ConfigMap {
	t.Helper()
	records := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns)
	c, err := records.Create(context.Background(), container.NewRecord(id, container.Request{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropFinalizers(t, ns, id) })
	return c
}

// dropFinalizers takes every finalizer off id's record, if it is there.
func dropFinalizers(t *testing.T, ns, id string) {
	t.Helper()
	records := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns)
	_, err := records.Patch(context.Background(), container.RecordName(id), types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("taking the finalizers off the record of %s: %v", id, err)
	}
}

// testLog copies the store's log to the test's.
type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
