package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/metadata"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// Options of one benchmark run.
type Options struct {
	Dir     string
	Sizes   []int // container counts for the read benchmark; the first is also the bulk size
	CreateN int   // POST / raw create pairs
	// Bulk: the first size's containers are made through the API (BulkClients at once)
	// and the run reports how fast; otherwise they are made like the fill (Populate).
	Bulk        bool
	BulkClients int
	// BulkRaw: the bulk is also made with raw client-go, for comparison (the concurrency
	// phase compares creates with raw client-go at several concurrencies; this is the
	// same at one, and costs a minute and 1000 more pods in the cluster).
	BulkRaw     bool
	Nodes       int // fake nodes (kwok)
	LatencyRuns int
	// ReplicaTries: creates and deletes for the staleness between two replicas.
	ReplicaTries int
	// FillClients: concurrent clients making the populations (16 when 0).
	FillClients int
	// FillThroughControllers: the populations above the first size are made by the
	// controllers from the Deployments (as the first size's always are), not written
	// as the controllers would have left them (direct.go).
	FillThroughControllers bool
	// FillAhead: how far the populations' creates may run ahead of the RUNNING events
	// (400 when 0; < 0: no bound).
	FillAhead int
	// HeapProfile: where the heap profile at the largest size is kept.
	HeapProfile string
	// Command is how the run was asked for (the report's first line).
	Command    string
	ServiceEnv []string // extra environment for the service process
	// ConcurrencyN: creates (then deletes) per client count and side in the phase
	// "concurrency"; 0 skips it.
	ConcurrencyN int
	// ConcurrencyRuns: how many times the phase runs (DefaultConcurrencyRuns when 0).
	ConcurrencyRuns int
	// CPUProfile: with -only=concurrency, the folder for CPU profiles of the service
	// (the profiling build), one per 10 s of the phase.
	CPUProfile string
	// RawFinalizer: the concurrency phase's raw side writes what the design's finalizer
	// costs too: its records carry it, and each delete ends with a PATCH that takes it
	// off (four writes, as a DELETE and its controller make). sp-bench sets it unless
	// -raw-finalizer=false.
	RawFinalizer bool
	// SharedCPUs: the control plane shares every CPU with the service and the benchmark.
	// Otherwise it has half of them to itself (harness.SplitCPUs), as a cluster's
	// control plane has nodes of its own: on shared CPUs what the service uses is taken
	// from the apiserver, which raw client-go leaves it all.
	SharedCPUs bool
	// Only, when set, runs that phase alone (one of Phases).
	Only string
	// The phase "memory at the limit" fills SP_MAX_CONTAINERS containers of its own
	// (minutes on 2 CPUs). NoLimit leaves it out of a full run; LimitFrom takes its
	// results from an earlier -only=memory-limit run's JSON instead of measuring.
	NoLimit   bool
	LimitFrom string
	Log       io.Writer
}

// Results of one run.
type Results struct {
	When       time.Time          `json:"when"`
	Machine    Machine            `json:"machine"`
	Versions   map[string]string  `json:"versions"`
	Command    string             `json:"command"`
	ServiceEnv []string           `json:"service_env,omitempty"`
	Create     CreateResult       `json:"create"`
	Resolve    ResolveResult      `json:"create_with_image_resolution"`
	Concurrent *ConcurrencyResult `json:"concurrency,omitempty"` // creates and deletes from many clients
	Bulk       *BulkResult        `json:"bulk,omitempty"`
	Reads      []ReadResult       `json:"reads"`
	Latency    map[string]Dist    `json:"status_latency"`
	Throughput []ThroughputResult `json:"status_throughput"`
	Startup    *StartupResult     `json:"startup,omitempty"`
	Heap       *HeapProfile       `json:"heap_profile,omitempty"`
	Replicas   *ReplicaResult     `json:"replicas,omitempty"`
	Missing    *MissingResult     `json:"get_unknown_id,omitempty"`
	Nodes      []NodeInfo         `json:"nodes"`
	Fills      []FillResult       `json:"fills"`
	Limit      *LimitResult       `json:"memory_at_the_limit,omitempty"`
	Duration   float64            `json:"duration_s"`
}

// NodeInfo is one fake node and how many pods it may hold.
type NodeInfo struct {
	Name            string `json:"name"`
	AllocatablePods int64  `json:"allocatable_pods"`
	Pods            int    `json:"pods_at_end"`
}

// Machine describes where the numbers come from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemoryGB  int    `json:"memory_gb"`
	GoVersion string `json:"go"`
	// ControlPlaneCPUs and OtherCPUs: the CPUs the control plane ran on and those the
	// service, NATS and the benchmark ran on (Options.SharedCPUs); empty, all shared.
	ControlPlaneCPUs []int `json:"control_plane_cpus,omitempty"`
	OtherCPUs        []int `json:"other_cpus,omitempty"`
}

// PhaseBurst is the status burst alone (-only=burst): the namespace filled to the
// largest size, then every pod of one node lost and back.
const PhaseBurst = "burst"

// PhaseResolve is POST with image resolution against POST without (-only=resolve).
const PhaseResolve = "resolve"

// Phases are the phases -only can run alone.
var Phases = []string{PhaseMemoryLimit, PhaseBurst, PhaseConcurrency, PhaseResolve}

// Run performs every benchmark (or o.Only) in one fresh environment.
func Run(ctx context.Context, o Options) (*Results, error) {
	if o.Only != "" && !slices.Contains(Phases, o.Only) {
		return nil, fmt.Errorf("no phase %q (there are %s)", o.Only, strings.Join(Phases, ", "))
	}
	if o.FillClients > 0 {
		fillClients = o.FillClients
	}
	if o.FillAhead != 0 {
		fillAhead = max(o.FillAhead, 0)
	}
	start := time.Now()
	log := &stamped{w: o.Log, start: start}
	m := machine()
	if !o.SharedCPUs {
		// Pinned before anything starts: the processes started later keep this CPU set.
		m.ControlPlaneCPUs, m.OtherCPUs = harness.SplitCPUs()
		if err := harness.PinSelf(m.OtherCPUs); err != nil {
			return nil, err
		}
	}
	e, err := Setup(ctx, o.Dir, o.Nodes, m.ControlPlaneCPUs, log)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	e.RawFinalizer = o.RawFinalizer
	res := &Results{When: start.UTC(), Machine: m, Command: o.Command, Latency: map[string]Dist{},
		Versions: map[string]string{"kubernetes": harness.KubernetesVersion, "etcd": harness.EtcdVersion, "kwok": harness.KwokVersion}}
	switch o.Only {
	case "":
		if err := e.runAll(ctx, o, res, log); err != nil {
			return nil, err
		}
	case PhaseBurst:
		if err := e.burstAlone(ctx, o, res, log); err != nil {
			return nil, err
		}
		res.Duration = time.Since(start).Seconds()
		return res, nil
	}
	if o.Only == PhaseResolve {
		fmt.Fprintf(log, "bench: create with image resolution: %d POSTs each through a resolving and a plain service\n", o.CreateN)
		if res.Resolve, err = e.Resolution(ctx, o.CreateN); err != nil {
			return nil, err
		}
		res.Duration = time.Since(start).Seconds()
		return res, nil
	}
	if o.Only == PhaseConcurrency {
		if err := e.concurrencyAlone(ctx, o, res, log); err != nil {
			return nil, err
		}
		res.Duration = time.Since(start).Seconds()
		return res, nil
	}
	switch {
	case o.Only == "" && o.LimitFrom != "":
		if res.Limit, err = limitFrom(o.LimitFrom); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "bench: memory at the limit: from %s (measured %s)\n", o.LimitFrom, res.Limit.When)
	case o.Only == "" && o.NoLimit:
	default:
		// Last: its own namespace and services (the others' are stopped by now).
		fmt.Fprintln(log, "bench: memory at the limit")
		lr, err := e.MemoryAtLimit(ctx, "bench-limit")
		if err != nil {
			return nil, fmt.Errorf("memory at the limit: %w", err)
		}
		res.Limit = &lr
	}
	if res.Nodes, err = e.nodes(ctx); err != nil {
		return nil, err
	}
	res.Duration = time.Since(start).Seconds()
	return res, nil
}

// runAll is every phase but the memory at the limit, in order; their services are
// stopped when it returns.
func (e *Env) runAll(ctx context.Context, o Options, res *Results, log io.Writer) error {
	rawBulkNS := ""
	if o.BulkRaw {
		rawBulkNS = "bench-raw-bulk"
	}
	for _, ns := range []string{"bench", "bench-raw", rawBulkNS, "bench-lat0"} {
		if ns == "" {
			continue
		}
		if err := harness.EnsureNamespace(ctx, e.Admin, ns); err != nil {
			return err
		}
	}
	res.ServiceEnv = o.ServiceEnv
	svc, err := e.StartService(ctx, "bench", o.ServiceEnv...)
	if err != nil {
		return err
	}
	defer svc.Stop() // stopped earlier by the restart; a second Stop is harmless

	ids, filled, err := e.firstSize(ctx, o, svc, rawBulkNS, res, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "bench: reads at %d\n", len(ids))
	r, err := e.Reads(ctx, svc, ids)
	if err != nil {
		return fmt.Errorf("reads: %w", err)
	}
	res.Reads = append(res.Reads, r)

	fmt.Fprintf(log, "bench: create: %d POSTs interleaved with %d raw creates of each kind\n", o.CreateN, o.CreateN)
	if res.Create, err = e.Create(ctx, svc, "bench-raw", o.CreateN); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	for i := range o.CreateN {
		ids = append(ids, fmt.Sprintf("create-%04d", i))
	}
	fmt.Fprintf(log, "bench: create with image resolution: %d POSTs each through a resolving and a plain service\n", o.CreateN)
	if res.Resolve, err = e.Resolution(ctx, o.CreateN); err != nil {
		return fmt.Errorf("create with image resolution: %w", err)
	}
	if o.ConcurrencyN > 0 {
		if res.Concurrent, err = e.concurrencyPhase(ctx, o, o.ConcurrencyN, log); err != nil {
			return err
		}
	}
	for _, size := range o.Sizes[1:] {
		need := size - len(ids)
		if need <= 0 {
			continue
		}
		like := ids[0]
		if o.FillThroughControllers {
			like = ""
		}
		if err := e.fill(ctx, svc, filled, filled+need, size, like, res, log); err != nil {
			return err
		}
		for i := filled; i < filled+need; i++ {
			ids = append(ids, fmt.Sprintf("fill-%05d", i))
		}
		filled += need
		fmt.Fprintf(log, "bench: reads at %d\n", len(ids))
		r, err := e.Reads(ctx, svc, ids)
		if err != nil {
			return fmt.Errorf("reads: %w", err)
		}
		res.Reads = append(res.Reads, r)
	}

	fmt.Fprintln(log, "bench: status latency, debounce 500 ms (default)")
	if res.Latency["debounce_500ms"], err = e.StatusLatency(ctx, svc, "bench", o.LatencyRuns); err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	ids = append(ids, "latency")
	svc0, err := e.StartService(ctx, "bench-lat0", append([]string{"SP_MONITOR_DEBOUNCE_MS=0"}, o.ServiceEnv...)...)
	if err != nil {
		return err
	}
	fmt.Fprintln(log, "bench: status latency, debounce 0")
	res.Latency["debounce_0"], err = e.StatusLatency(ctx, svc0, "bench-lat0", o.LatencyRuns)
	svc0.Stop()
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}

	bin := e.ProfBin
	if bin == "" {
		bin = e.Bin
	}
	fmt.Fprintf(log, "bench: restart with %d containers, then a second replica\n", len(ids))
	restarted, second, st, err := e.Restart(ctx, svc, "bench", bin, ids, o.ServiceEnv)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer restarted.Stop()
	defer second.Stop()
	res.Startup = &st
	if restarted.PprofURL != "" {
		hp, err := restarted.HeapProfile(ctx, len(ids), o.HeapProfile)
		if err != nil {
			fmt.Fprintln(log, "bench: heap profile:", err)
		} else {
			fmt.Fprintf(log, "bench: heap profile at %d containers in %s\n", len(ids), o.HeapProfile)
			res.Heap = &hp
		}
	}

	fmt.Fprintf(log, "bench: staleness between two replicas, %d creates and deletes\n", o.ReplicaTries)
	rr, err := e.Replicas(ctx, restarted, second, "bench", o.ReplicaTries)
	if err != nil {
		return fmt.Errorf("replicas: %w", err)
	}
	res.Replicas = &rr
	second.Stop()

	fmt.Fprintf(log, "bench: GETs of unknown ids at %d (the 404 confirmation)\n", len(ids))
	mr, err := e.Missing(ctx, restarted, ids)
	if err != nil {
		return fmt.Errorf("unknown ids: %w", err)
	}
	res.Missing = &mr

	fmt.Fprintf(log, "bench: status burst at %d: every pod of one node changing at once\n", len(ids))
	if res.Throughput, err = e.Burst(ctx, restarted, "bench"); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	return nil
}

// fill makes the fill containers from..to-1 in the namespace "bench" (total: its
// containers afterwards) and notes how it went in res.Fills and the log. like "": through
// the controllers (Populate); else written as the controllers left container like's
// (PopulateDirect).
func (e *Env) fill(ctx context.Context, svc *Service, from, to, total int, like string, res *Results, log io.Writer) error {
	var fr FillResult
	var err error
	if like == "" {
		fmt.Fprintf(log, "bench: filling up to %d containers (client-go, as the service creates them)\n", total)
		fr, err = e.Populate(ctx, svc, "bench", from, to)
	} else {
		fmt.Fprintf(log, "bench: filling up to %d containers (written as the controllers leave %s's; the controller-manager stopped meanwhile)\n", total, like)
		fr, err = e.PopulateDirect(ctx, svc, "bench", like, from, to)
	}
	if err != nil {
		return fmt.Errorf("populate: %w", err)
	}
	fr.Total = total
	res.Fills = append(res.Fills, fr)
	fmt.Fprintf(log, "bench: %d containers made and RUNNING in %.0f s (%.1f/s); CPU, %% of one: %s\n", to-from, fr.Seconds, fr.PerSecond, kv(fr.CPU))
	return nil
}

// firstSize makes the first size's containers: through the API with o.Bulk, or else
// like the fill. It returns their ids and how many of them are fill containers.
func (e *Env) firstSize(ctx context.Context, o Options, svc *Service, rawBulkNS string, res *Results, log io.Writer) ([]string, int, error) {
	n := o.Sizes[0]
	var ids []string
	if !o.Bulk {
		if err := e.fill(ctx, svc, 0, n, n, "", res, log); err != nil {
			return nil, 0, err
		}
		for i := range n {
			ids = append(ids, fmt.Sprintf("fill-%05d", i))
		}
		return ids, n, nil
	}
	fmt.Fprintf(log, "bench: bulk: %d containers, %d clients, through the API (raw too: %v)\n", n, o.BulkClients, o.BulkRaw)
	b, err := e.Bulk(ctx, svc, rawBulkNS, n, o.BulkClients)
	if err != nil {
		return nil, 0, fmt.Errorf("bulk: %w", err)
	}
	res.Bulk = &b
	for i := range n {
		ids = append(ids, fmt.Sprintf("bulk-%05d", i))
	}
	return ids, 0, nil
}

// burstAlone is PhaseBurst: the service's namespace filled to the largest size, then
// the burst.
func (e *Env) burstAlone(ctx context.Context, o Options, res *Results, log io.Writer) error {
	if err := harness.EnsureNamespace(ctx, e.Admin, "bench"); err != nil {
		return err
	}
	svc, err := e.StartService(ctx, "bench", o.ServiceEnv...)
	if err != nil {
		return err
	}
	defer svc.Stop()
	// As in a full run: the first size through the controllers, the rest written as
	// they would have left them unless o.FillThroughControllers.
	size, first := o.Sizes[len(o.Sizes)-1], o.Sizes[0]
	if len(o.Sizes) == 1 || o.FillThroughControllers {
		first = size
	}
	if err := e.fill(ctx, svc, 0, first, first, "", res, log); err != nil {
		return err
	}
	if first < size {
		if err := e.fill(ctx, svc, first, size, size, "fill-00000", res, log); err != nil {
			return err
		}
	}
	if _, err := e.settle(ctx, 2*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(log, "bench: status burst at %d: every pod of one node changing at once\n", size)
	if res.Throughput, err = e.Burst(ctx, svc, "bench"); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	for _, t := range res.Throughput {
		fmt.Fprintf(log, "bench: burst %s: %d pods (%d containers) written in %.2f s (%.0f/s); per container write→event p50 %.0f ms, p99 %.0f ms, max %.0f ms; last event %.2f s after the last write; lost %d; %s; CPU: %s\n",
			t.Change, t.Pods, t.Containers, t.WritesS, t.WritesPerS, t.Latency.P50, t.Latency.P99, t.Latency.Max, t.LagS, t.Lost, watchControl(t), topCPU(t.CPU, 4))
	}
	return nil
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if _, v, ok := strings.Cut(line, ":"); ok {
					m.CPUModel = strings.TrimSpace(v)
					break
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGB = (kb + 512*1024) / (1024 * 1024)
		}
	}
	return m
}

// nodes lists the fake nodes, their pod capacity and how many pods each holds.
func (e *Env) nodes(ctx context.Context) ([]NodeInfo, error) {
	nodes, err := e.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(e.RC)
	if err != nil {
		return nil, err
	}
	var out []NodeInfo
	for _, n := range nodes.Items {
		pods, err := md.Resource(corev1.SchemeGroupVersion.WithResource("pods")).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String(), ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		out = append(out, NodeInfo{Name: n.Name, AllocatablePods: n.Status.Allocatable.Pods().Value(), Pods: len(pods.Items)})
	}
	return out, nil
}

// stamped prefixes every line written with the time since the run started.
type stamped struct {
	w     io.Writer
	start time.Time
}

func (s *stamped) Write(p []byte) (int, error) {
	d := time.Since(s.start).Round(time.Second)
	if _, err := fmt.Fprintf(s.w, "[%02d:%02d] %s", int(d.Minutes()), int(d.Seconds())%60, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// limitFrom reads the phase "memory at the limit" from the results (JSON) of an earlier
// run.
func limitFrom(path string) (*LimitResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Limit == nil {
		return nil, fmt.Errorf("%s holds no memory at the limit", path)
	}
	if r.Limit.When == "" {
		r.Limit.When = r.When.UTC().Format("2006-01-02 15:04 UTC")
	}
	return r.Limit, nil
}
