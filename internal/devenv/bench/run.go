package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/devenv/harness"
)

// Options of one benchmark run.
type Options struct {
	Dir         string
	Sizes       []int // container counts for the read benchmark; the first is also the bulk size
	CreateN     int   // POST / raw create pairs
	BulkClients int
	LatencyRuns int
	ServiceEnv  []string // extra environment for the service process
	Log         io.Writer
}

// Results of one run.
type Results struct {
	When       time.Time         `json:"when"`
	Machine    Machine           `json:"machine"`
	Versions   map[string]string `json:"versions"`
	Command    string            `json:"command"`
	ServiceEnv []string          `json:"service_env,omitempty"`
	Create     CreateResult      `json:"create"`
	Bulk       BulkResult        `json:"bulk"`
	Reads      []ReadResult      `json:"reads"`
	Latency    map[string]Dist   `json:"status_latency"`
	Duration   float64           `json:"duration_s"`
}

// Machine describes where the numbers come from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemoryGB  int    `json:"memory_gb"`
	GoVersion string `json:"go"`
}

// Run performs every benchmark in one fresh environment.
func Run(ctx context.Context, o Options) (*Results, error) {
	start := time.Now()
	log := o.Log
	e, err := Setup(ctx, o.Dir, log)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	for _, ns := range []string{"bench", "bench-raw", "bench-raw-bulk", "bench-lat0"} {
		if err := harness.EnsureNamespace(ctx, e.Admin, ns); err != nil {
			return nil, err
		}
	}
	res := &Results{When: start.UTC(), Machine: machine(), Command: "make bench", Latency: map[string]Dist{},
		Versions: map[string]string{"kubernetes": harness.KubernetesVersion, "etcd": harness.EtcdVersion, "kwok": harness.KwokVersion}}

	res.ServiceEnv = o.ServiceEnv
	svc, err := e.StartService(ctx, "bench", o.ServiceEnv...)
	if err != nil {
		return nil, err
	}
	defer svc.Stop()

	bulkN := o.Sizes[0]
	fmt.Fprintf(log, "bench: bulk: %d containers, %d clients, through the API and raw\n", bulkN, o.BulkClients)
	if res.Bulk, err = e.Bulk(ctx, svc, "bench-raw-bulk", bulkN, o.BulkClients); err != nil {
		return nil, fmt.Errorf("bulk: %w", err)
	}
	var ids []string
	for i := range bulkN {
		ids = append(ids, fmt.Sprintf("bulk-%05d", i))
	}
	fmt.Fprintf(log, "bench: reads at %d\n", len(ids))
	r, err := e.Reads(ctx, svc, ids)
	if err != nil {
		return nil, fmt.Errorf("reads: %w", err)
	}
	res.Reads = append(res.Reads, r)

	fmt.Fprintf(log, "bench: create: %d POSTs interleaved with %d raw creates\n", o.CreateN, o.CreateN)
	if res.Create, err = e.Create(ctx, svc, "bench-raw", o.CreateN); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	for i := range o.CreateN {
		ids = append(ids, fmt.Sprintf("create-%04d", i))
	}
	filled := 0
	for _, size := range o.Sizes[1:] {
		need := size - len(ids)
		fmt.Fprintf(log, "bench: filling up to %d containers\n", size)
		if err := svc.Populate(filled, filled+need); err != nil {
			return nil, fmt.Errorf("populate: %w", err)
		}
		for i := filled; i < filled+need; i++ {
			ids = append(ids, fmt.Sprintf("fill-%05d", i))
		}
		filled += need
		fmt.Fprintf(log, "bench: reads at %d\n", len(ids))
		r, err := e.Reads(ctx, svc, ids)
		if err != nil {
			return nil, fmt.Errorf("reads: %w", err)
		}
		res.Reads = append(res.Reads, r)
	}

	fmt.Fprintln(log, "bench: status latency, debounce 500 ms (default)")
	if res.Latency["debounce_500ms"], err = e.StatusLatency(ctx, svc, "bench", o.LatencyRuns); err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	svc0, err := e.StartService(ctx, "bench-lat0", append([]string{"SP_MONITOR_DEBOUNCE_MS=0"}, o.ServiceEnv...)...)
	if err != nil {
		return nil, err
	}
	defer svc0.Stop()
	fmt.Fprintln(log, "bench: status latency, debounce 0")
	if res.Latency["debounce_0"], err = e.StatusLatency(ctx, svc0, "bench-lat0", o.LatencyRuns); err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	res.Duration = time.Since(start).Seconds()
	return res, nil
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
