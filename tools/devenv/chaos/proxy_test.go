package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// An integration test below uses the shared control plane (testenv), which Main stops
// if this package started it.
func TestMain(m *testing.M) { testenv.Main(m) }

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods":                                   "pods",
		"/api/v1/namespaces/ns/pods/p-1/status":                        "pods",
		"/api/v1/pods":                                                 "pods",
		"/api/v1/namespaces/ns":                                        "namespaces",
		"/api/v1/watch/namespaces/ns/services":                         "services",
		"/apis/apps/v1/namespaces/ns/deployments":                      "deployments",
		"/apis/apps/v1/namespaces/ns/deployments/web-abc":              "deployments",
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/dcm-leader": "leases",
		"/apis/coordination.k8s.io/v1/leases":                          "leases",
		"/api/v1/namespaces/ns/configmaps/dcm-container-web":           "configmaps",
		"/api/v1/watch/namespaces/ns/configmaps":                       "configmaps",
		"/version":                                                     "",
	} {
		if got := ResourceOf(path); got != want {
			t.Errorf("ResourceOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// fakeAPI streams a line every 10 ms to any watch, answers anything else at once, and
// counts the mutating requests it received.
func fakeAPI(t *testing.T) (*FaultProxy, *atomic.Int32) {
	t.Helper()
	var mutations atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsWatch(r) {
			w.WriteHeader(200)
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		if mutating(r.Method) {
			mutations.Add(1)
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	p, err := StartFaultProxy(target, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, &mutations
}

// watchLines opens a watch through the proxy and sends each line it reads; the channel
// closes when the stream ends.
func watchLines(t *testing.T, ctx context.Context, p *FaultProxy, path string) (<-chan string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path+"?watch=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, nil
}

// quiet: nothing arrives on lines for d (drained first).
func quiet(lines <-chan string, d time.Duration) bool {
	for {
		select {
		case <-lines:
			continue
		default:
		}
		break
	}
	select {
	case <-lines:
		return false
	case <-time.After(d):
		return true
	}
}

func TestProxyBlocksWatchesOfOneResource(t *testing.T) {
	p, _ := fakeAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pods, err := watchLines(t, ctx, p, "/api/v1/namespaces/ns/pods")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := watchLines(t, ctx, p, "/api/v1/namespaces/ns/services")
	if err != nil {
		t.Fatal(err)
	}
	<-pods
	p.Set(ProxyFault{Kind: FaultWatchBlock, Resource: "pods"})
	time.Sleep(50 * time.Millisecond) // a line read before the block may still pass
	if !quiet(pods, 300*time.Millisecond) {
		t.Error("the pods watch still speaks while blocked")
	}
	if quiet(svcs, 300*time.Millisecond) {
		t.Error("the services watch went silent too")
	}
	// A new watch of pods hangs.
	hang, cancelHang := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelHang()
	if _, err := watchLines(t, hang, p, "/api/v1/namespaces/ns/pods"); err == nil {
		t.Error("a new pods watch was answered while blocked")
	}
	held, _, _, _ := p.Set(ProxyFault{})
	if held < 2 {
		t.Errorf("held %d watches, want the open one and the new one", held)
	}
	if quiet(pods, time.Second) {
		t.Error("the pods watch did not come back")
	}
}

func TestProxyBreaksWatchesOfOneResource(t *testing.T) {
	p, _ := fakeAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deps, err := watchLines(t, ctx, p, "/apis/apps/v1/namespaces/ns/deployments")
	if err != nil {
		t.Fatal(err)
	}
	<-deps
	p.Set(ProxyFault{Kind: FaultWatchBreak, Resource: "deployments"})
	deadline := time.After(2 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-deps:
		case <-deadline:
			t.Fatal("the deployments watch was not cut")
		}
	}
	if _, err := watchLines(t, ctx, p, "/apis/apps/v1/namespaces/ns/deployments"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a new deployments watch: %v, want 503", err)
	}
	if _, err := watchLines(t, ctx, p, "/api/v1/namespaces/ns/pods"); err != nil {
		t.Errorf("a pods watch: %v", err)
	}
	p.Set(ProxyFault{})
	if _, err := watchLines(t, ctx, p, "/apis/apps/v1/namespaces/ns/deployments"); err != nil {
		t.Errorf("after the break: %v", err)
	}
}

func TestProxyDelaysAndLosesAnswers(t *testing.T) {
	p, mutations := fakeAPI(t)
	p.Set(ProxyFault{Kind: FaultAPIDelay, Latency: 200 * time.Millisecond})
	start := time.Now()
	resp, err := http.Get(p.URL + "/api/v1/namespaces/ns/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("answered in %s, want at least the latency", d)
	}

	// Every mutating answer lost: the request reached the apiserver, the client got no
	// answer; reads pass.
	p.Set(ProxyFault{Kind: FaultAPIDrop, Percent: 100, Seed: 1})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err = client.Post(p.URL+"/apis/apps/v1/namespaces/ns/deployments", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Errorf("POST answered %d, want no answer", resp.StatusCode)
	} else if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Logf("POST: %v", err)
	}
	if mutations.Load() != 1 {
		t.Errorf("the apiserver got %d mutations, want 1", mutations.Load())
	}
	resp, err = client.Get(p.URL + "/api/v1/namespaces/ns/pods")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("GET while mutating answers are lost: %v", err)
	} else {
		resp.Body.Close()
	}
	if _, _, _, dropped := p.Set(ProxyFault{}); dropped != 1 {
		t.Errorf("dropped %d, want 1", dropped)
	}
}

// Against the real apiserver: a client-go informer through the proxy (its kubeconfig,
// as a replica gets it) goes silent while pods watches are blocked and catches up once
// they are not.
func TestProxyBlocksAnInformer(t *testing.T) {
	env := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	p, err := NewFaultProxy(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kc := t.TempDir() + "/kubeconfig"
	if err := p.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	pods := f.Core().V1().Pods().Informer()
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }() // Shutdown waits for the informers, which stop with ctx
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		t.Fatal("no sync through the proxy")
	}
	has := func(name string) bool {
		_, ok, _ := pods.GetStore().GetByKey(ns + "/" + name)
		return ok
	}
	mkPod := func(name string) {
		t.Helper()
		_, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/x:v1"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(d time.Duration, cond func() bool) bool {
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
		return true
	}

	mkPod("before")
	if !waitFor(10*time.Second, func() bool { return has("before") }) {
		t.Fatal("the informer never saw a pod made before the block")
	}
	p.Set(ProxyFault{Kind: FaultWatchBlock, Resource: "pods"})
	mkPod("during")
	if waitFor(2*time.Second, func() bool { return has("during") }) {
		t.Fatal("the informer saw a pod made while its watch was blocked")
	}
	if held, _, _, _ := p.Set(ProxyFault{}); held == 0 {
		t.Error("the proxy held no watch")
	}
	if !waitFor(10*time.Second, func() bool { return has("during") }) {
		t.Fatal("the informer did not catch up once the block ended")
	}
	// Broken watches are re-opened by the reflector once the break ends.
	p.Set(ProxyFault{Kind: FaultWatchBreak, Resource: "pods"})
	mkPod("broken")
	time.Sleep(time.Second)
	p.Set(ProxyFault{})
	if !waitFor(40*time.Second, func() bool { return has("broken") }) {
		t.Fatal("the informer did not recover from a broken watch")
	}
}
