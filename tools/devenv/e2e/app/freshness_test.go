package app_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Issue 23 item 4: a replica whose watch of one resource breaks answered GET from that
// cache with no bound (200 for as long as the watch stayed broken). Between the provider
// and the apiserver, a proxy holds every request for Pods (list and watch) and cuts the
// open Pods watch; the other watches go on. Once the bound (SP_K8S_MAX_STALENESS, 1 s
// here) has passed, GET and LIST answer 503 naming Pods, /readyz fails naming Pods and
// since when, and the metric shows the lag; once the proxy lets Pods through again,
// all answer 200.
func TestStaleCacheAnswers503(t *testing.T) {
	ns := testenv.Namespace(t)
	proxy := newWatchBreaker(t, testenv.Cluster(t).Config, "/pods")
	p := startProvider(t, ns, withEnv("SP_K8S_MAX_STALENESS=1s"), throughProxy(proxy.URL))
	p.waitSynced(t)
	create(t, p, "fresh-1", spec("web", "nginx"))
	if r := do(t, http.MethodGet, p.URL+containers+"/fresh-1", nil); r.Status != http.StatusOK {
		t.Fatalf("GET before the fault: %d %s", r.Status, r.Body)
	}
	if r := do(t, http.MethodGet, p.URL+"/readyz", nil); r.Status != http.StatusOK {
		t.Fatalf("/readyz before the fault: %d %s", r.Status, r.Body)
	}

	proxy.block()
	var r response
	testenv.Eventually(t, 30*time.Second, "GET refused once the Pods cache is behind", func() error {
		if r = do(t, http.MethodGet, p.URL+containers+"/fresh-1", nil); r.Status != http.StatusServiceUnavailable {
			return fmt.Errorf("GET %d %s", r.Status, r.Body)
		}
		return nil
	})
	expectProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	if detail, _ := r.JSON["detail"].(string); !strings.HasPrefix(detail, "this replica's view of Pods has been out of date for ") ||
		r.Header.Get("Retry-After") == "" {
		t.Errorf("503 does not name the cache, or has no Retry-After: %v %s", r.Header, r.Body)
	}
	expectProblem(t, do(t, http.MethodGet, p.URL+containers, nil), http.StatusServiceUnavailable, "unavailable")
	ready := do(t, http.MethodGet, p.URL+"/readyz", nil)
	if body := string(ready.Body); ready.Status != http.StatusServiceUnavailable || !strings.Contains(body, "\ncaches: Pods out of date since ") ||
		strings.Contains(body, "Deployments") || strings.Contains(body, "Services") {
		t.Errorf("/readyz with the Pods cache behind: %d %s", ready.Status, body)
	}
	if got := p.metric(t, `sp_cache_stale_seconds{cache="pods"}`); got < 1 {
		t.Errorf(`sp_cache_stale_seconds{cache="pods"} = %v, want at least the bound (1 s)`, got)
	}
	if got := p.metric(t, `sp_cache_stale_seconds{cache="deployments"}`); got != 0 {
		t.Errorf(`sp_cache_stale_seconds{cache="deployments"} = %v, want 0`, got)
	}

	proxy.unblock()
	testenv.Eventually(t, 60*time.Second, "answers again once the Pods watch is back", func() error {
		for _, path := range []string{containers + "/fresh-1", containers, "/readyz"} {
			if r := do(t, http.MethodGet, p.URL+path, nil); r.Status != http.StatusOK {
				return fmt.Errorf("%s: %d %s", path, r.Status, r.Body)
			}
		}
		return nil
	})
}

// throughProxy points the provider at a proxy (plain HTTP; the proxy holds the
// credentials).
func throughProxy(u string) providerOpt {
	return func(_ *config.Config, rc *rest.Config) {
		*rc = rest.Config{Host: u, QPS: rc.QPS, Burst: rc.Burst, WrapTransport: rc.WrapTransport}
	}
}

// watchBreaker is a proxy to the apiserver that, while blocked, holds every GET of the
// collections whose path ends with suffix (lists and watches) until it is unblocked or
// the client gives up, and cuts those in flight when it blocks.
type watchBreaker struct {
	URL    string
	suffix string
	proxy  *httputil.ReverseProxy

	mu       sync.Mutex
	blocked  chan struct{} // closed on unblock; nil while not blocked
	inFlight map[*context.CancelFunc]bool
}

func newWatchBreaker(t *testing.T, admin *rest.Config, suffix string) *watchBreaker {
	t.Helper()
	target, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	b := &watchBreaker{suffix: suffix, inFlight: map[*context.CancelFunc]bool{}}
	b.proxy = &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: rt,
		ErrorLog:  log.New(io.Discard, "", 0), // cut requests are the point
	}
	srv := httptest.NewServer(b)
	t.Cleanup(func() {
		b.unblock()
		srv.CloseClientConnections()
		srv.Close()
	})
	b.URL = srv.URL
	return b
}

func (b *watchBreaker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, b.suffix) {
		b.proxy.ServeHTTP(w, r)
		return
	}
	b.mu.Lock()
	for b.blocked != nil {
		held := b.blocked
		b.mu.Unlock()
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
		b.mu.Lock()
	}
	ctx, cancel := context.WithCancel(r.Context())
	b.inFlight[&cancel] = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.inFlight, &cancel)
		b.mu.Unlock()
		cancel()
	}()
	b.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// block holds new requests and cuts those in flight (an open watch ends as if its
// connection broke).
func (b *watchBreaker) block() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked == nil {
		b.blocked = make(chan struct{})
	}
	for cancel := range b.inFlight {
		(*cancel)()
	}
}

func (b *watchBreaker) unblock() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked != nil {
		close(b.blocked)
		b.blocked = nil
	}
}
