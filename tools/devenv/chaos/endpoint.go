package chaos

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// Endpoint plays the provider's Kubernetes Service for the registry: one loopback
// address that forwards each request to a replica that is up, taking turns. Both
// replicas register it as SP_ENDPOINT, so DCM's creates, deletes and health polls keep
// working while one replica is down, as they would in a cluster.
type Endpoint struct {
	URL string
	srv *http.Server
}

// StartEndpoint serves on a free loopback port in front of replicas.
func StartEndpoint(replicas map[string]*Replica) (*Endpoint, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var turn atomic.Uint64
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		names := []string{"a", "b"}
		first := int(turn.Add(1) % 2)
		for i := range names {
			r := replicas[names[(first+i)%2]]
			if r == nil || !r.Routable() {
				continue
			}
			if _, u := r.Current(); u != "" {
				target, _ := url.Parse(u)
				pr.SetURL(target)
				return
			}
		}
		// Nobody is up: a closed port, so the caller sees the outage.
		pr.SetURL(&url.URL{Scheme: "http", Host: "127.0.0.1:1"})
	}}
	e := &Endpoint{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: proxy}}
	go e.srv.Serve(ln)
	return e, nil
}

// Close stops serving.
func (e *Endpoint) Close() { _ = e.srv.Close() }
