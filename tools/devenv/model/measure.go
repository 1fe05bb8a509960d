package model

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/dcm-project/k8s-container-sp/internal/app"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/bench"
)

// Namespace is the modelled namespace.
const Namespace = "dcm-containers"

// Dist summarizes latency samples, as make bench does.
type Dist = bench.Dist

// Memory is the service process's memory at one moment.
type Memory struct {
	RSSBytes  int64 `json:"rss_bytes"`  // VmRSS
	PeakBytes int64 `json:"peak_bytes"` // VmHWM: the most RSS so far
	// HeapInuseBytes is the Go heap in use as found (what make bench reads from
	// go_memstats_heap_inuse_bytes); HeapLiveBytes is the heap left after a forced GC.
	HeapInuseBytes uint64 `json:"go_heap_inuse_bytes"`
	HeapLiveBytes  uint64 `json:"go_heap_live_bytes"`
}

// SizeResult is one size's figures.
type SizeResult struct {
	Containers int `json:"containers"`
	// From app.New to the store synced (every cache filled), to /readyz answering 200,
	// to this replica leading the status controller.
	SyncedS  float64 `json:"synced_s"`
	ReadyS   float64 `json:"ready_s"`
	LeadingS float64 `json:"leading_s"`
	// RepublishSentS: from synced to every status handed to NATS (the controller has
	// nothing pending); RepublishS: from synced to the last container's event received
	// by a subscriber (filled by the parent).
	RepublishSentS  float64 `json:"republish_sent_s"`
	RepublishS      float64 `json:"republish_s"`
	EventsPerSecond float64 `json:"events_per_s"`
	EventsReceived  int     `json:"events_received"`
	// ContainersReported: distinct containers whose event arrived.
	ContainersReported int    `json:"containers_reported"`
	Idle               Memory `json:"idle"`
	AfterReads         Memory `json:"after_reads"`
	bench.ReadLoad
	// Requests the service made to the model apiserver, by "VERB resource"; Unknown:
	// those it does not serve (should be none). Filled by the parent.
	Requests map[string]int `json:"apiserver_requests"`
	Unknown  map[string]int `json:"unknown_requests,omitempty"`

	// CPU the service's process used from its start to synced, and in all by the end of
	// the reads (user + system): on a shared machine the wall times above depend on
	// what else runs; these do less.
	SyncCPUS  float64 `json:"sync_cpu_s"`
	TotalCPUS float64 `json:"total_cpu_s"`
	// URL is the service's, from its process to the parent's reads (not reported).
	URL string `json:"url,omitempty"`

	SyncedAt int64 `json:"synced_at_unix_ns"` // wall clock, for the parent's event times
}

// ServiceOptions say where the service measured by MeasureService finds its world.
type ServiceOptions struct {
	Size                      int
	APIServer, NATS, Registry string
	Log                       io.Writer // the service's log (JSON lines)
	// CPUProfile, when set, is where a CPU profile of the whole measurement goes, and
	// CPUProfile with ".heap" for ".cpu" where a heap profile taken idle goes.
	CPUProfile string
}

// MeasureService runs the service (internal/app, as the binary wires it) against the
// model apiserver at o.APIServer holding o.Size containers and measures it: the time to
// synced, the republish of every status, memory idle (the parent then puts the read
// load on it: MeasureReads, and the process measures itself again: MeasureAfterReads).
// It returns with the service still running; stop (once the caller is done, e.g. the
// parent has counted the events) stops it.
func MeasureService(ctx context.Context, o ServiceOptions) (res SizeResult, stop func(), err error) {
	res.Containers = o.Size
	start := time.Now()
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return res, nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, nil, err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, nil, err
	}
	base := "http://" + ln.Addr().String()
	cfg, err := config.Load([]string{
		"SP_NAME=k8s-container-sp", "SP_ENDPOINT=" + base, "DCM_REGISTRATION_URL=" + o.Registry, "SP_NATS_URL=" + o.NATS,
		"SP_K8S_NAMESPACE=" + Namespace, "SP_SERVER_ADDRESS=" + ln.Addr().String(), "SP_MONITOR_IDENTITY=model-0",
		"SP_IMAGE_RESOLVE=false", // the model serves no images
		// Creates only: the model makes none, but an operator with this many would set it.
		"SP_MAX_CONTAINERS=" + strconv.Itoa(max(5000, o.Size+o.Size/10)),
	})
	if err != nil {
		ln.Close()
		return res, nil, err
	}
	log := slog.New(slog.NewJSONHandler(o.Log, nil))
	klog.SetSlogLogger(log)
	// As app.RESTConfig makes it from a kubeconfig: no content type (client-go's
	// generated clients then ask for protobuf), the service's QPS and burst.
	rc := &rest.Config{Host: o.APIServer, QPS: cfg.Kubernetes.QPS, Burst: cfg.Kubernetes.Burst}
	a, err := app.New(cfg, rc, "model", log)
	if err != nil {
		ln.Close()
		return res, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx, ln) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}

	// Start-up: poll what the service shows (cheaply: its own state, /readyz less often).
	var synced, ready, leading, sent time.Time
	since := func(t time.Time) float64 { return t.Sub(start).Seconds() }
	deadline := time.After(20 * time.Minute)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for n := 0; sent.IsZero() || ready.IsZero(); n++ {
		select {
		case err := <-done:
			return res, nil, fmt.Errorf("the service stopped: %v", err)
		case <-deadline:
			return res, nil, fmt.Errorf("not synced and republished in 20 minutes (synced %v, leading %v, pending %d)",
				!synced.IsZero(), a.Leading(), a.Controller().Pending())
		case <-tick.C:
		}
		now := time.Now()
		if synced.IsZero() && a.Store().Synced() {
			synced = now
			res.SyncCPUS = cpuSeconds()
		}
		if leading.IsZero() && a.Leading() {
			leading = now
		}
		if ready.IsZero() && n%10 == 0 && readyz(client, base) {
			ready = time.Now()
		}
		if !synced.IsZero() && sent.IsZero() && a.Controller().Active() && a.Controller().Pending() == 0 {
			sent = now
		}
	}
	res.SyncedS, res.ReadyS, res.LeadingS = since(synced), since(ready), since(leading)
	res.RepublishSentS = sent.Sub(synced).Seconds()
	res.SyncedAt = synced.UnixNano()

	time.Sleep(2 * time.Second) // what the republish left behind settles
	res.Idle = memory()
	if o.CPUProfile != "" {
		if err := writeHeapProfile(strings.Replace(o.CPUProfile, ".cpu", ".heap", 1)); err != nil {
			return res, nil, err
		}
	}

	res.URL = base
	return res, stop, nil
}

// MeasureReads puts the read load on the service at base, which holds size containers:
// GETs of known ids, full LIST walks, GETs from 8 clients. It runs in the parent, not in
// the service's process: the client's allocations (every answer read) are not the
// service's memory.
func MeasureReads(res *SizeResult, base string, size int) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}
	anyID := func() string { return ID(rand.IntN(size)) }
	get := func(path string) (time.Duration, []byte, error) {
		t := time.Now()
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return d, b, err
	}
	// Full walks in pages of 50: three up to 20,000 containers (more while the pages are
	// too few, see bench.MeasureReads); above, 2,000 pages or more, one walk has samples enough.
	walks := 3
	if size > 20000 {
		walks = 1
	}
	load, err := bench.MeasureReads(get, anyID, walks)
	if err == nil {
		err = load.ClientsErr
	}
	if err != nil {
		return err
	}
	res.ReadLoad = load
	return nil
}

// AfterReads is what the service's process measures once the parent's reads are done.
type AfterReads struct {
	Memory    Memory  `json:"after_reads"`
	TotalCPUS float64 `json:"total_cpu_s"`
}

// MeasureAfterReads measures this process once the reads are done.
func MeasureAfterReads() AfterReads {
	return AfterReads{Memory: memory(), TotalCPUS: cpuSeconds()}
}

// cpuSeconds is the CPU this process has used, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func readyz(c *http.Client, base string) bool {
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// memory reads this process's: RSS first (a forced GC would change what it shows
// next), then the heap as found, then the heap a GC leaves.
func memory() Memory {
	var m Memory
	m.RSSBytes, m.PeakBytes = procStatus("VmRSS"), procStatus("VmHWM")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.HeapInuseBytes = ms.HeapInuse
	runtime.GC()
	runtime.ReadMemStats(&ms)
	m.HeapLiveBytes = ms.HeapAlloc
	return m
}

// writeHeapProfile writes the heap profile (as of the last GC) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// procStatus is a "kB" line of /proc/self/status, in bytes; 0 if unknown.
func procStatus(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
