package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/testbed"
)

// World is everything a chaos run starts: the harness control plane with two kwok nodes
// and NATS with JetStream (the testbed, which also builds the service binary and runs
// it as processes), the real DCM registry, a stand-in for the
// provider's Kubernetes Service in front of the two replicas (the endpoint the registry
// calls), the two replicas, and the checker's own consumer of the event stream.
type World struct {
	Dir      string
	NS       string
	Env      *testbed.Env
	Registry *harness.Registry
	Endpoint *Endpoint
	Rec      *Recorder
	Replicas map[string]*Replica // "a" and "b"
	// Proxies stand between each replica and the apiserver (proxy.go), by replica name;
	// they outlive the replica's restarts.
	Proxies map[string]*FaultProxy
	Hist    *History
	Log     io.Writer

	// bin is the service binary the replicas run (the Env's, with a bug when one is injected).
	bin string
	// staleness is the replicas' SP_K8S_MAX_STALENESS.
	staleness time.Duration
	http      *http.Client
	closeOnce sync.Once
	watchers  sync.WaitGroup // recovery watchers
}

// Namespace the replicas serve (the deploy/ default).
const namespace = "dcm-containers"

// streamName and streamSubjects are what DCM's registry creates (dcm-status on dcm.*).
// The world creates the stream before anything publishes, so every event is kept from
// the first one, whichever of the registry and the replicas comes up first.
const (
	streamName     = "dcm-status"
	streamSubjects = "dcm.*"
	// registryConsumer is the durable consumer the registry (v0.1.0-rc.1) reads the
	// stream with, acknowledging each event once its row has it.
	registryConsumer = "service-provider-manager"
)

// Setup starts the world. On error, what was started is stopped.
// inject names a bug to build into the service (inject.go); empty: none.
func Setup(ctx context.Context, dir, inject string, staleness time.Duration, hist *History, log io.Writer) (_ *World, err error) {
	w := &World{Dir: dir, NS: namespace, Hist: hist, Log: log, Replicas: map[string]*Replica{}, Proxies: map[string]*FaultProxy{}, staleness: staleness,
		http: &http.Client{Timeout: 45 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	var flags []string
	if inject != "" {
		if flags, err = bugBuildFlags(inject); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "chaos: building the service with bug %q injected (go build %s)\n", inject, strings.Join(flags, " "))
	}
	// Two nodes, so a lost node leaves somewhere for new pods to go.
	if w.Env, err = testbed.Setup(ctx, testbed.Options{Dir: dir, Nodes: len(nodeNames), Log: log, BuildFlags: flags}); err != nil {
		return nil, err
	}
	w.bin = w.Env.Bin
	if err := harness.EnsureNamespace(ctx, w.Env.Admin, w.NS); err != nil {
		return nil, err
	}
	if w.Rec, err = StartRecorder(ctx, w.Env.NATS.URL); err != nil {
		return nil, err
	}
	bins, err := harness.EnsureBinaries(ctx, log)
	if err != nil {
		return nil, err
	}
	if w.Registry, err = harness.StartRegistry(bins.Registry, filepath.Join(dir, "registry"), w.Env.NATS.URL, false); err != nil {
		return nil, err
	}
	if w.Endpoint, err = StartEndpoint(w.Replicas); err != nil {
		return nil, err
	}
	for _, name := range []string{"a", "b"} {
		w.Replicas[name] = &Replica{Name: name, w: w}
		if w.Proxies[name], err = NewFaultProxy(w.Env.RC); err != nil {
			return nil, err
		}
		if err := w.Proxies[name].WriteKubeconfig(w.kubeconfig(name)); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"a", "b"} {
		if err := w.Replicas[name].Start(ctx); err != nil {
			return nil, err
		}
	}
	if err := w.waitFor(ctx, 60*time.Second, "one replica leading", func() error {
		if n := w.Leaders(); n != 1 {
			return fmt.Errorf("%d leaders", n)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Creates through the registry need it to see the provider ready (its health poll).
	if err := w.waitFor(ctx, 60*time.Second, "the registry to see the provider ready", func() error {
		var out struct {
			Providers []struct {
				Name         string `json:"name"`
				HealthStatus string `json:"health_status"`
			} `json:"providers"`
		}
		if err := w.getJSON(ctx, w.Registry.URL+"/providers", &out); err != nil {
			return err
		}
		for _, p := range out.Providers {
			if p.Name == providerName && p.HealthStatus == "ready" {
				return nil
			}
		}
		return fmt.Errorf("providers: %+v", out.Providers)
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// providerName is SP_NAME, the registry's key (testbed.Env.Launch sets it).
const providerName = "k8s-container-sp"

// Close stops everything Setup started, by PID, newest first.
func (w *World) Close() { w.closeOnce.Do(w.close) }

func (w *World) close() {
	for _, name := range []string{"b", "a"} {
		if r := w.Replicas[name]; r != nil {
			r.Stop(true)
		}
	}
	for _, p := range w.Proxies {
		p.Close()
	}
	if w.Endpoint != nil {
		w.Endpoint.Close()
	}
	if w.Registry != nil {
		w.Registry.Stop()
	}
	if w.Rec != nil {
		w.Rec.Close()
	}
	if w.Env != nil {
		w.Env.Close()
	}
}

// kubeconfig is replica name's kubeconfig: its proxy, no credentials (the proxy has them).
func (w *World) kubeconfig(name string) string {
	return filepath.Join(w.Dir, "kubeconfig-"+name)
}

// Leaders counts the replicas that say they publish.
func (w *World) Leaders() int {
	n := 0
	for _, r := range w.Replicas {
		if s := r.Service(); s != nil && r.Up() && s.Leading() {
			n++
		}
	}
	return n
}

// Leader is the replica that publishes, or nil.
func (w *World) Leader() *Replica {
	for _, name := range []string{"a", "b"} {
		r := w.Replicas[name]
		if s := r.Service(); s != nil && r.Up() && s.Leading() {
			return r
		}
	}
	return nil
}

func (w *World) waitFor(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (w *World) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}
