package chaos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/testbed"
)

// Replica is one of the two service replicas ("a" or "b"). Each start is a new process
// with a new name (a-1, a-2, …), which is also its leader-election identity, as a
// replaced pod would have: a restarted leader cannot simply resume its old hold on the lock.
type Replica struct {
	Name string
	w    *World

	mu       sync.Mutex
	gen      int
	svc      *testbed.Service
	proc     string
	up       bool
	ready    bool         // caches synced: the endpoint sends it requests
	stopping *atomic.Bool // of the current process: set before the run stops it
}

// Start launches a new process and waits until its caches are synced.
func (r *Replica) Start(ctx context.Context) error {
	r.mu.Lock()
	r.gen++
	proc := fmt.Sprintf("%s-%d", r.Name, r.gen)
	r.mu.Unlock()
	w := r.w
	started := time.Now()
	s, err := w.Env.Launch(w.NS, proc, w.bin,
		// The registry reaches the provider through one endpoint in front of both
		// replicas, as it would through the provider's Kubernetes Service.
		"SP_ENDPOINT="+w.Endpoint.URL,
		"DCM_REGISTRATION_URL="+w.Registry.URL,
		"SP_REGISTRATION_INTERVAL=1m",
		// Through its fault proxy (overrides the testbed's direct kubeconfig).
		"SP_K8S_KUBECONFIG="+w.kubeconfig(r.Name),
		"SP_K8S_MAX_STALENESS="+w.staleness.String())
	if err != nil {
		return err
	}
	stopping := &atomic.Bool{}
	r.mu.Lock()
	r.svc, r.proc, r.up, r.stopping = s, proc, true, stopping
	r.mu.Unlock()
	w.Hist.Add(Entry{Type: "proc", Kind: "started", Via: r.Name, Proc: proc, Start: started, Note: s.URL})
	// A process that ends without the run stopping it is a finding (a crash).
	go func() {
		err := s.WaitUntil(context.Background(), 365*24*time.Hour, "stopped by the run", stopping.Load)
		if err != nil && !stopping.Load() {
			w.Hist.Add(Entry{Type: "proc", Kind: "exited", Via: r.Name, Proc: proc, Start: time.Now(), Err: err.Error()})
			r.mu.Lock()
			if r.proc == proc {
				r.up, r.ready = false, false
			}
			r.mu.Unlock()
		}
	}()
	if err := s.WaitUntil(ctx, 90*time.Second, "caches synced", func() bool {
		m, err := s.Metrics()
		return err == nil && m["sp_informers_synced"] == 1
	}); err != nil {
		return err
	}
	w.Hist.Add(Entry{Type: "proc", Kind: "ready", Via: r.Name, Proc: proc, Start: started, End: time.Now()})
	r.mu.Lock()
	if r.proc == proc {
		r.ready = r.up
	}
	r.mu.Unlock()
	return nil
}

// Stop ends the current process: gracefully (SIGTERM, the service drains and releases
// the leader lock) or not (SIGKILL, a crash). It returns once the process is gone.
func (r *Replica) Stop(graceful bool) {
	r.mu.Lock()
	s, proc, up, stopping := r.svc, r.proc, r.up, r.stopping
	r.up, r.ready = false, false
	r.mu.Unlock()
	if s == nil || !up {
		return
	}
	stopping.Store(true)
	start := time.Now()
	kind := "stopped"
	if !graceful {
		kind = "killed"
		_ = syscall.Kill(s.PID(), syscall.SIGKILL)
	}
	s.Stop() // SIGTERM (a no-op after SIGKILL) and wait for the exit
	r.w.Hist.Add(Entry{Type: "proc", Kind: kind, Via: r.Name, Proc: proc, Start: start, End: time.Now()})
}

// Service is the current process (nil before the first start).
func (r *Replica) Service() *testbed.Service {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.svc
}

// Up: the current process runs (it may still be syncing).
func (r *Replica) Up() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up
}

// Routable: the current process is up with its caches synced, as a Service's
// endpoints hold only ready pods.
func (r *Replica) Routable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up && r.ready
}

// Current is the process name and URL requests to this replica go to. A stopped
// replica keeps its last URL: clients calling it then get connection refused, as they
// would.
func (r *Replica) Current() (proc, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.svc == nil {
		return "", ""
	}
	return r.proc, r.svc.URL
}
