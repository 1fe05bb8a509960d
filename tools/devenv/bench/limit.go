package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// PhaseMemoryLimit is the phase "memory at the limit" (-only=memory-limit).
const PhaseMemoryLimit = "memory-limit"

// The memory limit the service is deployed with (deploy/base/deployment.yaml) and the
// Go memory limit it derives from it (automemlimit's default ratio, 0.9). The bench's
// processes run without a cgroup limit, so the phase sets GOMEMLIMIT to that value
// itself; the service then leaves it as it is.
const (
	deployMemoryLimit = 256 << 20
	deployGoMemLimit  = deployMemoryLimit * 9 / 10
)

// limitListClients walk the whole list at once, each limitListWalks times, in pages of
// limitPageSize (the largest page the API allows).
const (
	limitListClients = 8
	limitListWalks   = 3
	limitPageSize    = 1000
)

// LimitResult is the phase "memory at the limit": SP_MAX_CONTAINERS containers, each as
// large as SP_CONTAINER_MAX_BYTES allows, under a service with its default limits and
// the deployment's memory limit. Numbers only: the defaults' bound is what they show.
type LimitResult struct {
	Containers int `json:"containers"`
	// ObjectBytes: each container's Kubernetes objects as JSON (container.ObjectBytes,
	// what SP_CONTAINER_MAX_BYTES bounds), MaxObjectBytes that limit.
	ObjectBytes    int `json:"object_bytes_each"`
	MaxObjectBytes int `json:"max_object_bytes"`
	MaxContainers  int `json:"max_containers"`
	// MemoryLimitBytes: the deployment's container memory limit; GoMemLimitBytes the Go
	// memory limit set (GOMEMLIMIT), as the service reports it (go_gc_gomemlimit_bytes).
	MemoryLimitBytes int64      `json:"memory_limit_bytes"`
	GoMemLimitBytes  float64    `json:"go_memlimit_bytes"`
	Fill             FillResult `json:"fill"`
	ReadyS           float64    `json:"ready_s"` // process start to /readyz 200
	SettleS          float64    `json:"settle_s"`
	// After the control plane went quiet and the next GC cycle ended: RSS, the Go heap
	// in use, and all the Go runtime holds from the OS (what GOMEMLIMIT bounds:
	// go_memstats_sys_bytes less go_memstats_heap_released_bytes).
	RSSBytes       int64   `json:"rss_bytes"`
	HeapInuseBytes float64 `json:"go_heap_inuse_bytes"`
	GoTotalBytes   float64 `json:"go_runtime_bytes"`
	// StartPeakRSSBytes: the process's peak RSS until then (VmHWM: the start-up, its
	// initial lists and the republish included).
	StartPeakRSSBytes int64 `json:"peak_rss_bytes_before_lists"`
	// The LIST load: ListClients clients each walking the whole list ListWalks times in
	// pages of ListPageSize, at once; the peaks sampled meanwhile (RSS every 5 ms, the
	// heap every 100 ms), RSS just after, and the peak since the start (VmHWM).
	ListClients       int     `json:"list_clients"`
	ListWalks         int     `json:"list_walks_each"`
	ListPageSize      int     `json:"list_page_size"`
	ListedPerWalk     int     `json:"listed_per_walk"`
	ListSeconds       float64 `json:"list_s"`
	ListPeakRSSBytes  int64   `json:"list_peak_rss_bytes"`
	ListPeakHeapBytes float64 `json:"list_peak_go_heap_inuse_bytes"`
	ListRSSAfterBytes int64   `json:"list_rss_bytes_after"`
	PeakRSSBytes      int64   `json:"peak_rss_bytes"`
	// OneMore: the answer to one more create (a container of the same size): its status
	// and problem code (507 container-limit-reached expected).
	OneMoreStatus int     `json:"one_more_create_status"`
	OneMoreCode   string  `json:"one_more_create_code"`
	OneMoreDetail string  `json:"one_more_create_detail"`
	PhaseSeconds  float64 `json:"phase_s"`
	// When: set when a full run took the phase from an earlier run (Options.LimitFrom),
	// that run's time.
	When string `json:"when,omitempty"`
}

// maxSizedSpec is specJSON's container with one env var (PAD) whose value makes its
// Kubernetes objects, as the service builds them in namespace ns for an id of idLen
// characters, as large as limit allows: container.ObjectBytes ≤ limit, and one more
// byte of value would pass it. It returns the spec and that size.
func maxSizedSpec(ns string, idLen, limit int) (v1alpha1.ContainerSpec, int, error) {
	var c v1alpha1.Container
	if err := json.Unmarshal(specJSON("app"), &c); err != nil {
		return c.Spec, 0, err
	}
	spec := c.Spec
	id := strings.Repeat("a", idLen)
	size := func(k int) (int, error) {
		s := spec
		env := []v1alpha1.EnvVar{{Name: "PAD", Value: strings.Repeat("x", k)}}
		s.Process = &v1alpha1.ContainerProcess{Env: &env}
		objs, err := objectsOf(ns, id, &s)
		if err != nil {
			return 0, err
		}
		return container.ObjectBytes(objs)
	}
	lo, hi := 0, container.MaxEnvValue // size(lo) ≤ limit < size(hi)
	if n, err := size(lo); err != nil || n > limit {
		return spec, n, fmt.Errorf("the container alone is %d bytes, over %d (%v)", n, limit, err)
	}
	if n, err := size(hi); err != nil || n <= limit {
		return spec, n, fmt.Errorf("one env value cannot fill %d bytes (%v)", limit, err)
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		n, err := size(mid)
		if err != nil {
			return spec, 0, err
		}
		if n <= limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	env := []v1alpha1.EnvVar{{Name: "PAD", Value: strings.Repeat("x", lo)}}
	spec.Process = &v1alpha1.ContainerProcess{Env: &env}
	n, err := size(lo)
	return spec, n, err
}

// objectsOf builds a container's objects as rawObjects does (the service's mapping and
// options).
func objectsOf(ns, id string, spec *v1alpha1.ContainerSpec) (container.Objects, error) {
	return container.Build(id, spec, container.Options{Namespace: ns, ExternalServiceType: corev1.ServiceTypeLoadBalancer,
		PodSecurity: container.Baseline})
}

// MemoryAtLimit fills namespace ns with SP_MAX_CONTAINERS containers (its default), each
// as large as SP_CONTAINER_MAX_BYTES (its default) allows, made with client-go as the
// service makes them (record, Deployment, Service; through a helper service that holds
// no limit, until it published RUNNING for each). Then it starts the service with its
// default limits and the deployment's memory limit (GOMEMLIMIT, as the service would
// derive it from a 256 MiB cgroup limit), and measures its memory idle, under
// concurrent full LISTs, and that one more create is refused (507).
func (e *Env) MemoryAtLimit(ctx context.Context, ns string) (LimitResult, error) {
	start := time.Now()
	res := LimitResult{Containers: container.DefaultMaxContainers, MaxObjectBytes: container.DefaultMaxObjectBytes,
		MaxContainers: container.DefaultMaxContainers, MemoryLimitBytes: deployMemoryLimit,
		ListClients: limitListClients, ListWalks: limitListWalks, ListPageSize: limitPageSize}
	const prefix = "limit-"
	idLen := len(fmt.Sprintf("%s%05d", prefix, 0))
	spec, n, err := maxSizedSpec(ns, idLen, container.DefaultMaxObjectBytes)
	if err != nil {
		return res, err
	}
	res.ObjectBytes = n
	if err := harness.EnsureNamespace(ctx, e.Admin, ns); err != nil {
		return res, err
	}
	helper, err := e.StartService(ctx, ns)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(e.Log, "bench: memory at the limit: filling %d containers of %d bytes each\n", res.Containers, n)
	// The cluster IPs from 32,000 on: apart from the bench's other fills (the first
	// 10,000 or so).
	f := filler{prefix: prefix, ipBase: 32000, objects: func(ns, id string) (container.Objects, error) { return objectsOf(ns, id, &spec) }}
	res.Fill, err = e.populate(ctx, helper, ns, 0, res.Containers, f)
	helper.Stop()
	if err != nil {
		return res, fmt.Errorf("fill: %w", err)
	}
	res.Fill.Total = res.Containers
	fmt.Fprintf(e.Log, "bench: memory at the limit: %d containers made and RUNNING in %.0f s (%.1f/s)\n", res.Containers, res.Fill.Seconds, res.Fill.PerSecond)

	// The service as deployed: no limit overridden, the Go memory limit the 256 MiB
	// cgroup limit would give. Nothing of the run's -service-env.
	s, err := e.Launch(ns, ns, e.Bin, fmt.Sprintf("GOMEMLIMIT=%d", deployGoMemLimit))
	if err != nil {
		return res, err
	}
	defer s.Stop()
	if err := s.WaitUntil(ctx, 2*time.Minute, "ready", s.Ready); err != nil {
		return res, err
	}
	res.ReadyS = time.Since(s.Started).Seconds()
	if err := s.WaitUntil(ctx, time.Minute, "leading", s.Leading); err != nil {
		return res, err
	}
	settled, err := e.settle(ctx, 3*time.Minute)
	if err != nil {
		return res, err
	}
	res.SettleS = settled.Seconds()
	// The heap right after the start holds the initial lists' garbage; a GC cycle
	// ending after the quiet leaves what is live (the runtime forces one every 2 min).
	m0, err := s.Metrics()
	if err != nil {
		return res, err
	}
	var m map[string]float64
	if err := s.WaitUntil(ctx, 150*time.Second, "through a GC cycle", func() bool {
		m, err = s.Metrics()
		return err == nil && m["go_gc_duration_seconds_count"] > m0["go_gc_duration_seconds_count"]
	}); err != nil {
		return res, err
	}
	res.RSSBytes, _ = s.RSS()
	res.HeapInuseBytes = m["go_memstats_heap_inuse_bytes"]
	res.GoTotalBytes = m["go_memstats_sys_bytes"] - m["go_memstats_heap_released_bytes"]
	res.GoMemLimitBytes = m["go_gc_gomemlimit_bytes"]
	res.StartPeakRSSBytes, _ = peakRSS(s.PID())
	fmt.Fprintf(e.Log, "bench: memory at the limit: RSS %.0f MB, Go heap %.0f MB, peak RSS since the start %.0f MB\n",
		mb(float64(res.RSSBytes)), mb(res.HeapInuseBytes), mb(float64(res.StartPeakRSSBytes)))

	if err := e.limitLists(ctx, s, &res); err != nil {
		return res, err
	}
	fmt.Fprintf(e.Log, "bench: memory at the limit: %d clients listing at once: peak RSS %.0f MB, peak Go heap %.0f MB\n",
		res.ListClients, mb(float64(res.ListPeakRSSBytes)), mb(res.ListPeakHeapBytes))

	body, err := json.Marshal(v1alpha1.Container{Spec: spec})
	if err != nil {
		return res, err
	}
	// An id as long as the others': the id is in the objects' names, labels and
	// selectors, so a longer one would make the container larger than the limit (400).
	resp, err := s.Client().Post(s.URL+"/api/v1alpha1/containers?id="+oneMoreID(prefix, res.Containers), "application/json", bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var problem struct{ Type, Detail string }
	_ = json.Unmarshal(b, &problem)
	res.OneMoreStatus, res.OneMoreDetail = resp.StatusCode, problem.Detail
	if i := strings.LastIndexByte(problem.Type, '/'); i >= 0 {
		res.OneMoreCode = problem.Type[i+1:]
	} else {
		res.OneMoreCode = problem.Type
	}
	fmt.Fprintf(e.Log, "bench: memory at the limit: one more create: %d %s\n", res.OneMoreStatus, res.OneMoreCode)
	res.PhaseSeconds = time.Since(start).Seconds()
	return res, nil
}

// oneMoreID is the id of the create past the limit: the next of the fill's ids.
func oneMoreID(prefix string, containers int) string {
	return fmt.Sprintf("%s%05d", prefix, containers)
}

// limitLists runs the LIST load of the phase and samples the memory meanwhile.
func (e *Env) limitLists(ctx context.Context, s *Service, res *LimitResult) error {
	var maxRSS atomic.Int64
	var peakHeap atomic.Uint64 // float64 bits are not ordered; whole bytes are
	stop := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if r, err := s.RSS(); err == nil && r > maxRSS.Load() {
				maxRSS.Store(r)
			}
			if n%20 == 0 {
				if m, err := s.Metrics(); err == nil {
					if h := uint64(m["go_memstats_heap_inuse_bytes"]); h > peakHeap.Load() {
						peakHeap.Store(h)
					}
				}
			}
		}
	})
	t0 := time.Now()
	var listed atomic.Int64
	err := parallel(res.ListClients, 0, res.ListClients, func(int) error {
		for range res.ListWalks {
			n, err := s.listAll(ctx, res.ListPageSize)
			if err != nil {
				return err
			}
			listed.Store(int64(n))
		}
		return nil
	})
	res.ListSeconds = time.Since(t0).Seconds()
	close(stop)
	sampling.Wait()
	if err != nil {
		return fmt.Errorf("lists: %w", err)
	}
	res.ListedPerWalk = int(listed.Load())
	res.ListPeakRSSBytes, res.ListPeakHeapBytes = maxRSS.Load(), float64(peakHeap.Load())
	res.ListRSSAfterBytes, _ = s.RSS()
	res.PeakRSSBytes, _ = peakRSS(s.PID())
	return nil
}

// listAll walks the whole list in pages of size and returns how many containers it saw.
func (s *Service) listAll(ctx context.Context, size int) (int, error) {
	token, n := "", 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		path := fmt.Sprintf("/api/v1alpha1/containers?max_page_size=%d", size)
		if token != "" {
			path += "&page_token=" + url.QueryEscape(token)
		}
		_, b, err := s.get(path)
		if err != nil {
			return n, err
		}
		k, next, err := decodePage(b)
		if err != nil {
			return n, err
		}
		n += k
		if token = next; token == "" {
			return n, nil
		}
	}
}

// peakRSS is a process's peak resident memory since it started (VmHWM), in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) < 2 {
				break
			}
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
