package chaos

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FaultProxy stands between one replica and the apiserver: the replica's kubeconfig
// points at it (plain http on 127.0.0.1), and it forwards every request with the
// admin's credentials. The chaos schedule switches faults on and off in it at run time,
// so one replica's view of the cluster lags or breaks while the other's does not, as
// when one pod's watches stall behind a bad node's network.
//
// It is an HTTP proxy and not toxiproxy: toxiproxy works on TCP streams, and the client
// multiplexes requests over connections (HTTP/2 to the apiserver), so it cannot tell
// a watch of Pods from a GET of a ConfigMap, nor lose one answer after the apiserver has
// acted on the request. Here every request is seen whole, so a fault can pick the
// watches of one resource, or the answers of mutating requests only.
type FaultProxy struct {
	URL string

	rp  *httputil.ReverseProxy
	srv *http.Server
	ln  net.Listener

	mu    sync.Mutex
	fault ProxyFault
	// changed is closed (and replaced) whenever the fault changes, so held watches and
	// hanging requests look again.
	changed chan struct{}
	rnd     *rand.Rand
	// Counts of what the faults did, for the history.
	held, broken, delayed, dropped int
}

// ProxyFault is what the proxy does now; the zero value forwards everything.
type ProxyFault struct {
	Kind string // FaultWatchBlock, FaultWatchBreak, FaultAPIDelay, FaultAPIDrop, or ""
	// Resource whose watches a watch fault hits ("pods", "deployments", "services",
	// "configmaps": the records).
	Resource string
	// Latency added to every answer but a watch's (FaultAPIDelay).
	Latency time.Duration
	// Percent of mutating requests whose answer is lost (FaultAPIDrop).
	Percent int
	// Seed of the drop decisions.
	Seed uint64
}

func (f ProxyFault) String() string {
	switch f.Kind {
	case FaultWatchBlock, FaultWatchBreak:
		return f.Resource
	case FaultAPIDelay:
		return "latency " + f.Latency.String()
	case FaultAPIDrop:
		return fmt.Sprintf("%d%% of mutating answers lost", f.Percent)
	}
	return "none"
}

// errBroken ends a watch stream the proxy breaks.
var errBroken = errors.New("chaos proxy: watch broken")

// NewFaultProxy forwards to the apiserver of rc with rc's credentials.
func NewFaultProxy(rc *rest.Config) (*FaultProxy, error) {
	rt, err := rest.TransportFor(rc)
	if err != nil {
		return nil, err
	}
	host := rc.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	target, err := url.Parse(host)
	if err != nil {
		return nil, err
	}
	return StartFaultProxy(target, rt)
}

// StartFaultProxy listens on a free local port and forwards to target through rt.
func StartFaultProxy(target *url.URL, rt http.RoundTripper) (*FaultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{URL: "http://" + ln.Addr().String(), ln: ln, changed: make(chan struct{}), rnd: rand.New(rand.NewPCG(1, 2))}
	p.rp = &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = "" },
		Transport: rt,
		// Watches stream: every event is passed on as it comes.
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		// The apiserver unreachable, a stream cut, an answer to lose: the client sees
		// its connection closed, as it would without the proxy (not a 502 of ours,
		// which it would take for the apiserver's own error).
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
		ErrorLog:     discardLog,
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the proxy and every connection through it.
func (p *FaultProxy) Close() {
	p.Set(ProxyFault{})
	_ = p.srv.Close()
}

// Set switches the fault (the zero ProxyFault heals it) and returns what the previous
// one did: watches held, broken, answers delayed, lost.
func (p *FaultProxy) Set(f ProxyFault) (held, broken, delayed, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	held, broken, delayed, dropped = p.held, p.broken, p.delayed, p.dropped
	p.held, p.broken, p.delayed, p.dropped = 0, 0, 0, 0
	p.fault = f
	if f.Kind == FaultAPIDrop {
		p.rnd = rand.New(rand.NewPCG(f.Seed, f.Seed^0x5bd1e995))
	}
	close(p.changed)
	p.changed = make(chan struct{})
	return
}

// now is the fault in force and the channel closed at its next change.
func (p *FaultProxy) now() (ProxyFault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault, p.changed
}

func (p *FaultProxy) count(n *int) {
	p.mu.Lock()
	*n++
	p.mu.Unlock()
}

// IsWatch: the request opens a watch stream (?watch=true, or the old /watch/ paths).
func IsWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

// ResourceOf is the resource a request is about: "pods" in
// /api/v1/namespaces/ns/pods/name/status, "configmaps" in /api/v1/namespaces/ns/configmaps/name.
func ResourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	i := 2 // /api/v1/<resource>
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3 // /apis/<group>/<version>/<resource>
	}
	if i < len(parts) && parts[i] == "watch" {
		i++
	}
	if i+1 < len(parts) && parts[i] == "namespaces" && i+2 < len(parts) {
		i += 2
	}
	if i < len(parts) {
		return parts[i]
	}
	return ""
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// hits: the fault applies to watches of this request's resource.
func (f ProxyFault) hits(r *http.Request) bool {
	return (f.Kind == FaultWatchBlock || f.Kind == FaultWatchBreak) && IsWatch(r) && ResourceOf(r.URL.Path) == f.Resource
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	// A new watch of a blocked resource hangs until the block ends (or the client
	// gives up); one of a broken resource is refused.
	for {
		f, changed := p.now()
		if !f.hits(r) {
			break
		}
		if f.Kind == FaultWatchBreak {
			p.count(&p.broken)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"chaos proxy: watches of %s broken","reason":"ServiceUnavailable","code":503}`, f.Resource)
			return
		}
		p.count(&p.held)
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// modifyResponse applies the answer faults: a watch's stream goes through a gate; a
// non-watch answer is delayed, or lost.
func (p *FaultProxy) modifyResponse(resp *http.Response) error {
	r := resp.Request
	if IsWatch(r) {
		b := &gatedBody{ReadCloser: resp.Body, p: p, r: r, done: make(chan struct{})}
		go b.breakWhenBroken()
		resp.Body = b
		return nil
	}
	f, _ := p.now()
	switch f.Kind {
	case FaultAPIDelay:
		p.count(&p.delayed)
		select {
		case <-time.After(f.Latency):
		case <-r.Context().Done():
		}
	case FaultAPIDrop:
		if !mutating(r.Method) {
			break
		}
		p.mu.Lock()
		drop := p.rnd.IntN(100) < f.Percent
		if drop {
			p.dropped++
		}
		p.mu.Unlock()
		if drop {
			// The apiserver has acted; the client never hears of it.
			return errors.New("chaos proxy: answer lost")
		}
	}
	return nil
}

// gatedBody is a watch stream: while its resource is blocked, nothing passes (what the
// apiserver sends meanwhile waits, in order); once broken, it ends.
type gatedBody struct {
	io.ReadCloser
	p    *FaultProxy
	r    *http.Request
	done chan struct{}
	once sync.Once
}

// breakWhenBroken closes the apiserver's side of the stream as soon as its resource's
// watches are broken: a stream with nothing to send would otherwise wait in Read and
// never see the break.
func (b *gatedBody) breakWhenBroken() {
	for {
		f, changed := b.p.now()
		if f.Kind == FaultWatchBreak && f.hits(b.r) {
			_ = b.ReadCloser.Close()
			return
		}
		select {
		case <-changed:
		case <-b.done:
			return
		case <-b.r.Context().Done():
			return
		}
	}
}

func (b *gatedBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.ReadCloser.Close()
}

func (b *gatedBody) Read(buf []byte) (int, error) {
	if err := b.gate(); err != nil {
		return 0, err
	}
	n, err := b.ReadCloser.Read(buf)
	// Bytes that came while blocked are held until the block ends.
	if gerr := b.gate(); gerr != nil {
		return 0, gerr
	}
	return n, err
}

func (b *gatedBody) gate() error {
	counted := false
	for {
		f, changed := b.p.now()
		if !f.hits(b.r) {
			return nil
		}
		if f.Kind == FaultWatchBreak {
			b.p.count(&b.p.broken)
			return errBroken
		}
		if !counted {
			b.p.count(&b.p.held)
			counted = true
		}
		select {
		case <-changed:
		case <-b.r.Context().Done():
			return b.r.Context().Err()
		}
	}
}

// WriteKubeconfig writes a kubeconfig that points at the proxy (no credentials: the
// proxy adds the admin's).
func (p *FaultProxy) WriteKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["chaos-proxy"] = &clientcmdapi.Cluster{Server: p.URL}
	cfg.AuthInfos["chaos-proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["chaos-proxy"] = &clientcmdapi.Context{Cluster: "chaos-proxy", AuthInfo: "chaos-proxy"}
	cfg.CurrentContext = "chaos-proxy"
	return clientcmd.WriteToFile(*cfg, path)
}

// discardLog silences the proxy's per-request errors (every broken or held stream
// would log one); what the faults did is counted into the history instead.
var discardLog = log.New(io.Discard, "", 0)
