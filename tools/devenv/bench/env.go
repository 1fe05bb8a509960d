package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/testbed"
)

// Env is one benchmark run's world: the testbed, with reads audited, plus the profiling
// build of the service.
type Env struct {
	*testbed.Env
	// ProfBin is the same service built with net/http/pprof added (see profile.go);
	// empty when that build failed.
	ProfBin string
	// RawFinalizer: the concurrency phase's raw side keeps the service's finalizer on
	// its records and takes it off after each delete (Options.RawFinalizer).
	RawFinalizer bool
}

// Service is one k8s-container-sp process of the run.
type Service struct {
	*testbed.Service
	// PprofURL is set when the process is the profiling build (ProfBin).
	PprofURL string
}

// Setup builds what is missing and starts the control plane (nodes fake nodes) and
// NATS, and checks that the apiserver's audit log attributes reads.
func Setup(ctx context.Context, dir string, nodes int, controlPlaneCPUs []int, log io.Writer) (*Env, error) {
	e := &Env{}
	tb, err := testbed.Setup(ctx, testbed.Options{Dir: dir, Nodes: nodes, Log: log, AuditReads: true, ControlPlaneCPUs: controlPlaneCPUs,
		// Without the profiling build there is only no heap profile.
		AlsoBuild: func(ctx context.Context) error {
			if err := e.buildProfiling(ctx, dir); err != nil {
				fmt.Fprintf(log, "bench: no profiling build, so no heap profile: %v\n", err)
			}
			return nil
		}})
	if err != nil {
		return nil, err
	}
	e.Env = tb
	if err := e.checkAudit(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// checkAudit proves the audit log attributes reads before any figure relies on it: a
// GET of a Service by this process must appear under this binary's name.
func (e *Env) checkAudit(ctx context.Context) error {
	from := time.Now()
	if _, err := e.Admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		return err
	}
	want := filepath.Base(os.Args[0]) + " GET services"
	if err := waitUntil(ctx, 10*time.Second, func() bool {
		by, err := auditedReads(e.Cluster.AuditLogPath(), from, time.Now())
		return err == nil && by[want] == 1
	}); err != nil {
		return fmt.Errorf("the apiserver's audit log does not show %q: %w", want, err)
	}
	return nil
}

// Launch is testbed's Launch; with bin == e.ProfBin the process also serves
// net/http/pprof on its own port (PprofURL).
func (e *Env) Launch(ns, name, bin string, extraEnv ...string) (*Service, error) {
	s := &Service{}
	if bin == e.ProfBin {
		addr, err := proc.FreeAddr()
		if err != nil {
			return nil, err
		}
		extraEnv = append(extraEnv, pprofEnv+"="+addr)
		s.PprofURL = "http://" + addr
	}
	ts, err := e.Env.Launch(ns, name, bin, extraEnv...)
	if err != nil {
		return nil, err
	}
	s.Service = ts
	return s, nil
}

// StartService is testbed's StartService (the plain binary, caches synced and leading).
// The bench fills namespaces with 10,000 containers and more and then creates through
// the API, so its services hold no container limit (SP_MAX_CONTAINERS, default 5,000);
// a setting in extraEnv comes later and wins.
func (e *Env) StartService(ctx context.Context, ns string, extraEnv ...string) (*Service, error) {
	s, err := e.Env.StartService(ctx, ns, unlimited(extraEnv)...)
	if err != nil {
		return nil, err
	}
	return &Service{Service: s}, nil
}

// readRequests sums the apiserver's request counter for reads (GET, LIST) of the
// objects the service caches: what a read served from the cache must not cause. by
// breaks it down ("GET deployments").
func readRequests(m map[string]float64) (n float64, by map[string]float64) {
	by = map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "apiserver_request_total{") {
			continue
		}
		vb := labelVerb.FindStringSubmatch(k)
		r := labelResource.FindStringSubmatch(k)
		if vb == nil || r == nil || (vb[1] != "GET" && vb[1] != "LIST") {
			continue
		}
		switch r[1] {
		case "deployments", "pods", "services":
			n += v
			by[vb[1]+" "+r[1]] += v
		}
	}
	return n, by
}

// serviceKubeRequests sums the service's own count of its Kubernetes API requests.
func serviceKubeRequests(m map[string]float64) float64 {
	return sumOf(m, "sp_kubernetes_requests_total", func(string) bool { return true })
}

// unlimited is the bench services' environment: no container limit (see StartService),
// then extraEnv.
func unlimited(extraEnv []string) []string {
	return append([]string{"SP_MAX_CONTAINERS=1000000"}, extraEnv...)
}
