package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/dcm-project/k8s-container-sp/internal/metrics"
)

// KubeCallTimeout bounds every request to the Kubernetes API except watches.
const KubeCallTimeout = 15 * time.Second

// perCallDeadline bounds each request to the Kubernetes API, except watches. It replaces
// rest.Config.Timeout, which is an http.Client timeout and so also cuts every informer's
// watch after that long (each cut costs a re-list or re-watch, and a gap in events).
type perCallDeadline struct {
	rt      http.RoundTripper
	timeout time.Duration
}

func withPerCallDeadline(timeout time.Duration) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return &perCallDeadline{rt: rt, timeout: timeout} }
}

func (p *perCallDeadline) RoundTrip(r *http.Request) (*http.Response, error) {
	if metrics.IsWatch(r) {
		return p.rt.RoundTrip(r)
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	resp, err := p.rt.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	// The deadline also covers reading the body; it is released when the body is closed.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

func (p *perCallDeadline) WrappedRoundTripper() http.RoundTripper { return p.rt }

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// clusterProbe asks the apiserver's /readyz every interval, in the background, and
// keeps the answer: health reads it, so a burst of health polls costs no apiserver
// request (each would otherwise wait in the client's rate limiter with every other
// Kubernetes call, leader renewal included).
type clusterProbe struct {
	client   kubernetes.Interface
	interval time.Duration
	log      *slog.Logger

	down     time.Time // when the current outage began
	failures int

	mu   sync.Mutex
	err  error
	done bool
}

// errNotProbed is health's answer until the first probe finished.
var errNotProbed = errorString("the Kubernetes API has not been probed yet")

type errorString string

func (e errorString) Error() string { return string(e) }

func (p *clusterProbe) Run(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := p.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		p.mu.Lock()
		was := p.err
		p.err, p.done = err, true
		p.mu.Unlock()
		p.logChange(was, err)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// logChange logs an outage once when it starts and once when it ends, with how long it
// lasted and how many probes failed: not once per probe, nor once per health poll.
func (p *clusterProbe) logChange(was, now error) {
	switch {
	case now != nil && p.failures == 0:
		p.down, p.failures = time.Now(), 1
		p.log.Warn("Kubernetes API unreachable; health reports unhealthy until it answers again", "err", now)
	case now != nil:
		p.failures++
	case p.failures > 0:
		p.log.Info("Kubernetes API reachable again", "outage", time.Since(p.down).Round(time.Second).String(), "failed_probes", p.failures, "last_err", was)
		p.failures = 0
	}
}

// Last is the result of the latest probe.
func (p *clusterProbe) Last(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		return errNotProbed
	}
	return p.err
}
