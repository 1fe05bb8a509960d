package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// The service serves no pprof. For a heap profile the benchmark builds a second binary
// from the same source with one extra file added at build time (go build -overlay; the
// repository is not touched): it imports net/http/pprof and, only when pprofEnv is set,
// serves it on its own loopback port. The API, its mux and everything measured are the
// service's own; the only difference is the idle extra listener.
const pprofEnv = "SP_BENCH_PPROF_ADDRESS"

const pprofFile = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("` + pprofEnv + `"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
`

// buildProfiling builds e.ProfBin into dir.
func (e *Env) buildProfiling(ctx context.Context, dir string) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	src := filepath.Join(dir, "zz_bench_pprof.go")
	if err := os.WriteFile(src, []byte(pprofFile), 0o644); err != nil {
		return err
	}
	pkg := filepath.Join(root, "cmd", "k8s-container-sp")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkg, "zz_bench_pprof.go"): src}})
	if err != nil {
		return err
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return err
	}
	bin := filepath.Join(dir, "k8s-container-sp-pprof")
	if err := harness.BuildService(ctx, bin, "-overlay", ov); err != nil {
		return err
	}
	e.ProfBin = bin
	return nil
}

// HeapEntry is one line of `go tool pprof -top` on an in-use heap profile.
type HeapEntry struct {
	FlatMB  float64 `json:"flat_mb"`
	FlatPct float64 `json:"flat_pct"`
	CumMB   float64 `json:"cum_mb"`
	CumPct  float64 `json:"cum_pct"`
	Func    string  `json:"func"`
}

// HeapProfile is the in-use heap of the service (after a forced GC), by allocation site.
type HeapProfile struct {
	Containers int         `json:"containers"`
	TotalMB    float64     `json:"total_inuse_mb"`
	File       string      `json:"file,omitempty"`
	Top        []HeapEntry `json:"top"`
	Cum        []HeapEntry `json:"top_cumulative"`
}

// HeapProfile fetches /debug/pprof/heap?gc=1 from a profiling build and summarizes it
// with go tool pprof (flat and cumulative top entries). The profile is kept in file.
func (s *Service) HeapProfile(ctx context.Context, containers int, file string) (HeapProfile, error) {
	res := HeapProfile{Containers: containers, File: file}
	if s.PprofURL == "" {
		return res, fmt.Errorf("not a profiling build")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.PprofURL+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return res, err
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		return res, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return res, err
	}
	if resp.StatusCode != http.StatusOK {
		return res, fmt.Errorf("heap profile: %s", resp.Status)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return res, err
	}
	top := func(extra ...string) ([]HeapEntry, float64, error) {
		args := append([]string{"tool", "pprof", "-top", "-sample_index=inuse_space", "-unit=MB", "-nodecount=15"}, extra...)
		out, err := exec.CommandContext(ctx, "go", append(args, file)...).Output()
		if err != nil {
			return nil, 0, fmt.Errorf("go tool pprof: %w", err)
		}
		return parsePprofTop(out)
	}
	if res.Top, res.TotalMB, err = top(); err != nil {
		return res, err
	}
	res.Cum, _, err = top("-cum")
	return res, err
}

// parsePprofTop reads `go tool pprof -top -unit=MB` output: the total from the
// "Showing nodes accounting for X, Y% of Z total" line, then one entry per row.
func parsePprofTop(out []byte) ([]HeapEntry, float64, error) {
	var entries []HeapEntry
	var total float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	rows := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "Showing nodes accounting for") {
			if i := strings.LastIndex(line, " of "); i >= 0 {
				total, _ = strconv.ParseFloat(strings.TrimSuffix(strings.Fields(line[i+4:])[0], "MB"), 64)
			}
			continue
		}
		if strings.HasPrefix(line, "flat") {
			rows = true
			continue
		}
		f := strings.Fields(line)
		if !rows || len(f) < 6 {
			continue
		}
		num := func(s string) float64 {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(s, "MB"), "%"), 64)
			return v
		}
		entries = append(entries, HeapEntry{FlatMB: num(f[0]), FlatPct: num(f[1]), CumMB: num(f[3]), CumPct: num(f[4]),
			Func: strings.Join(f[5:], " ")})
	}
	return entries, total, sc.Err()
}

// startConcurrencyService starts the service for the concurrency phase, in
// concurrencyAPINS: the profiling build when a CPU profile is asked for, the plain
// binary otherwise.
func (e *Env) startConcurrencyService(ctx context.Context, o Options) (*Service, error) {
	if o.CPUProfile == "" || e.ProfBin == "" {
		return e.StartService(ctx, concurrencyAPINS, o.ServiceEnv...)
	}
	s, err := e.Launch(concurrencyAPINS, "bench-conc", e.ProfBin, unlimited(o.ServiceEnv)...)
	if err != nil {
		return nil, err
	}
	if err := s.WaitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// profileCPU takes 10-second CPU profiles of the service s and of the apiserver into
// dir (service-000.pprof, apiserver-000.pprof, ...) until the returned stop is called;
// `go tool pprof -top dir/service-*.pprof` merges them.
func (e *Env) profileCPU(ctx context.Context, s *Service, dir string, log io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	take := func(name string, get func(ctx context.Context) ([]byte, error)) {
		for i := 0; ctx.Err() == nil; i++ {
			b, err := get(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintf(log, "bench: cpu profile of the %s: %v\n", name, err)
				}
				return
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d.pprof", name, i)), b, 0o644); err != nil {
				fmt.Fprintln(log, "bench: cpu profile:", err)
				return
			}
		}
	}
	wg.Go(func() {
		take("service", func(ctx context.Context) ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.PprofURL+"/debug/pprof/profile?seconds=10", nil)
			if err != nil {
				return nil, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s", resp.Status)
			}
			return io.ReadAll(resp.Body)
		})
	})
	wg.Go(func() {
		take("apiserver", func(ctx context.Context) ([]byte, error) {
			return e.Admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "10").Timeout(20 * time.Second).DoRaw(ctx)
		})
	})
	return func() { cancel(); wg.Wait() }
}
