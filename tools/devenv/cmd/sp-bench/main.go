// Command sp-bench measures the service against the Kubernetes API on this machine and
// writes docs/reports/benchmarks.md and docs/reports/benchmarks.json (`make bench`).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/bench"
)

func main() {
	sizes := flag.String("sizes", "1000,10000", "container counts for the read benchmark (the first is also the bulk size with -bulk; the last is the restart, replicas and throughput size)")
	createN := flag.Int("create", 100, "POST / raw create pairs")
	latency := flag.Int("latency", 40, "status latency samples per debounce setting")
	replicas := flag.Int("replicas", 50, "creates and deletes on one replica, each read on the other until it agrees")
	bulk := flag.Bool("bulk", false, "make the first size's containers through the API (16 clients) and report how fast; without it they are made like the fill (the concurrency phase measures creates through the API)")
	bulkRaw := flag.Bool("bulk-raw", false, "with -bulk, also make the bulk with raw client-go (the concurrency phase compares with raw client-go already)")
	limit := flag.Bool("limit", true, "measure the memory at the limit (its own fill of SP_MAX_CONTAINERS containers: minutes)")
	limitFrom := flag.String("limit-from", "", "take the memory at the limit from this earlier -only="+bench.PhaseMemoryLimit+" run's JSON instead of measuring it")
	fillClients := flag.Int("fill-clients", 16, "concurrent clients making the populations")
	fillControllers := flag.Bool("fill-controllers", false, "make the populations above the first size through the controllers (13-16 minutes to 10,000 on 2 CPUs), not written as they would leave them")
	fillAhead := flag.Int("fill-ahead", 400, "how far the populations' creates may run ahead of the RUNNING events (< 0: no bound)")
	nodes := flag.Int("nodes", 4, "fake (kwok) nodes the pods are spread over")
	heap := flag.String("heap-profile", filepath.Join(os.TempDir(), "sp-bench-heap.pb.gz"), "where the service's heap profile at the largest size is kept")
	out := flag.String("out", "docs/reports", "folder for benchmarks.md and benchmarks.json")
	render := flag.Bool("render", false, "only rewrite benchmarks.md from benchmarks.json (e.g. after editing benchmarks-analysis.md)")
	serviceEnv := flag.String("service-env", "", "extra environment for the service, comma-separated (e.g. GOMEMLIMIT=120MiB)")
	concurrency := flag.Int("concurrency", bench.DefaultConcurrencyN, "creates (then deletes) per client count (8, 32, 64) and side, API and raw; 0 skips the phase")
	concurrencyRuns := flag.Int("concurrency-runs", bench.DefaultConcurrencyRuns, "how many times the concurrency phase runs (its verdict is the median run's ratio)")
	sharedCPUs := flag.Bool("shared-cpus", false, "let the control plane share every CPU with the service and the benchmark (by default it has half of them to itself, as on nodes of its own)")
	only := flag.String("only", "", "run one phase alone in its own fresh environment ("+strings.Join(bench.Phases, ", ")+"; "+bench.PhaseBurst+" first fills to the largest -sizes); its results go to -only-out, docs are left alone")
	rawFinalizer := flag.Bool("raw-finalizer", true, "in the concurrency phase, raw client-go's records carry the service's finalizer and each raw delete takes it off, as the design's four writes; false: raw deletes make three")
	cpuProfile := flag.String("cpu-profile", "", "with -only="+bench.PhaseConcurrency+", a folder for the service's CPU profiles during the phase (one per 10 s)")
	onlyOut := flag.String("only-out", filepath.Join(os.TempDir(), "sp-bench-only.json"), "where -only writes its results")
	flag.Parse()
	if *only != "" && !slices.Contains(bench.Phases, *only) {
		fmt.Fprintf(os.Stderr, "sp-bench: no phase %q (there are %s)\n", *only, strings.Join(bench.Phases, ", "))
		os.Exit(2)
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "sp-bench: bad -sizes")
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	if *render {
		b, err := os.ReadFile(filepath.Join(*out, "benchmarks.json"))
		if err != nil {
			fail(err)
		}
		var res bench.Results
		if err := json.Unmarshal(b, &res); err != nil {
			fail(err)
		}
		if err := bench.Write(&res, filepath.Join(*out, "benchmarks.md"), filepath.Join(*out, "benchmarks.json"),
			filepath.Join(*out, "benchmarks-analysis.md")); err != nil {
			fail(err)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "sp-bench: %v received, stopping\n", s)
		cancel()
	}()
	dir, err := os.MkdirTemp("", "sp-bench-")
	if err != nil {
		fail(err)
	}
	var extra []string
	if *serviceEnv != "" {
		extra = strings.Split(*serviceEnv, ",")
	}
	command := "make bench"
	if len(os.Args) > 1 {
		command = "go run ./tools/devenv/cmd/sp-bench " + strings.Join(os.Args[1:], " ")
	}
	res, err := bench.Run(ctx, bench.Options{Command: command, Dir: dir, Sizes: ns, CreateN: *createN, Bulk: *bulk, BulkClients: 16, BulkRaw: *bulkRaw, NoLimit: !*limit, LimitFrom: *limitFrom, Nodes: *nodes, LatencyRuns: *latency,
		ReplicaTries: *replicas, FillClients: *fillClients, FillThroughControllers: *fillControllers, FillAhead: *fillAhead, ConcurrencyN: *concurrency, ConcurrencyRuns: *concurrencyRuns, SharedCPUs: *sharedCPUs, CPUProfile: *cpuProfile, RawFinalizer: *rawFinalizer, HeapProfile: *heap, ServiceEnv: extra, Only: *only, Log: os.Stderr})
	if err != nil {
		// The service logs and the control plane's are there.
		fail(fmt.Errorf("%w (logs kept in %s)", err, dir))
	}
	os.RemoveAll(dir)
	if *only != "" {
		switch *only {
		case bench.PhaseConcurrency:
			fmt.Println(bench.ConcurrencyMarkdown(res))
		case bench.PhaseMemoryLimit:
			fmt.Println(bench.LimitMarkdown(res))
		}
		j, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(*onlyOut, append(j, '\n'), 0o644)
		}
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "sp-bench: wrote %s\n", *onlyOut)
		return
	}
	md := bench.Markdown(res, "")
	fmt.Println(md)
	if err := bench.Write(res, filepath.Join(*out, "benchmarks.md"), filepath.Join(*out, "benchmarks.json"),
		filepath.Join(*out, "benchmarks-analysis.md")); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "sp-bench: wrote %s/benchmarks.md and benchmarks.json\n", *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sp-bench:", err)
	os.Exit(1)
}
