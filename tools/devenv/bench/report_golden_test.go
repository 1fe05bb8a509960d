package bench

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/")

// loadResults reads testdata/results.json (a real run's docs/reports/benchmarks.json).
func loadResults(t *testing.T) *Results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// sparse is a run that measured less and lost events: every optional section is absent
// or takes its other branch.
func sparse(r *Results) *Results {
	s := *r
	s.ServiceEnv = nil
	s.Reads = r.Reads[:1]
	s.Create.RawParallel = Dist{}
	s.Bulk = nil // -bulk=false
	s.Latency = map[string]Dist{"debounce_500ms": {N: 40, P50: 510, P99: 700, Max: 800, Lost: 2}, "debounce_0": {N: 40, P50: 10, P99: 90, Max: 95}}
	s.Throughput = []ThroughputResult{r.Throughput[0]}
	s.Throughput[0].Lost = 3
	s.Throughput[0].StreamMessages = 0
	s.Fills, s.Nodes = nil, nil
	s.Startup, s.Heap, s.Replicas, s.Missing = nil, nil, nil, nil
	// A phase "concurrency" that left pods behind, had answers 503 and throttling.
	s.Concurrent = concurrencySample()
	s.Concurrent.PodsLeft, s.Concurrent.RecordsLeft, s.Concurrent.ThrottleLogs = 3, 1, 2
	s.Concurrent.Rows[0].Retried = 2
	return &s
}

// The report is the same Markdown, byte for byte, as the golden files (made with -update
// and read by a person): a change to the template shows up here as a diff to review.
func TestMarkdownGolden(t *testing.T) {
	full := loadResults(t)
	full.ServiceEnv = []string{"GOMEMLIMIT=120MiB"}
	full.Limit = limitSample()
	full.Concurrent = concurrencySample()
	full.Machine.ControlPlaneCPUs, full.Machine.OtherCPUs = []int{1}, []int{0}
	cases := []struct {
		name     string
		r        *Results
		analysis string
	}{
		{"full", full, "## Analysis\n\nWritten by hand, appended as is.\n"},
		{"sparse", sparse(loadResults(t)), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Markdown(c.r, c.analysis)
			path := filepath.Join("testdata", c.name+".golden.md")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("Markdown differs from %s (go test -run TestMarkdownGolden -update to accept):\n%s", path, firstDiff(got, string(want)))
			}
		})
	}
}

// limitSample is a phase "memory at the limit" (made up, not measured).
func limitSample() *LimitResult {
	return &LimitResult{Containers: 10000, ObjectBytes: 8192, MaxObjectBytes: 8192, MaxContainers: 10000,
		MemoryLimitBytes: deployMemoryLimit, GoMemLimitBytes: deployGoMemLimit,
		Fill:   FillResult{From: 0, To: 10000, Total: 10000, Seconds: 600, PerSecond: 16.7},
		ReadyS: 4.2, SettleS: 30, RSSBytes: 180 << 20, HeapInuseBytes: 120 << 20, GoTotalBytes: 150 << 20,
		StartPeakRSSBytes: 200 << 20, ListClients: 8, ListWalks: 3, ListPageSize: 1000, ListedPerWalk: 10000,
		ListSeconds: 2.5, ListPeakRSSBytes: 210 << 20, ListPeakHeapBytes: 140 << 20, ListRSSAfterBytes: 205 << 20,
		PeakRSSBytes: 210 << 20, OneMoreStatus: 507, OneMoreCode: "container-limit-reached",
		OneMoreDetail: "the provider holds 10000 containers, its limit (SP_MAX_CONTAINERS) is 10000; delete one or raise the limit"}
}

// sp-bench -only=memory-limit prints the same section the full report has.
func TestLimitMarkdown(t *testing.T) {
	r := loadResults(t)
	r.Limit = limitSample()
	section := LimitMarkdown(r)
	if !strings.HasPrefix(section, "## 9. Memory at the limit\n") || !strings.Contains(section, "**507 container-limit-reached**") {
		t.Errorf("section:\n%s", section)
	}
	if full := Markdown(r, ""); !strings.Contains(full, section) {
		t.Errorf("the full report does not hold the section")
	}
	r.Limit = nil
	if s := LimitMarkdown(r); s != "" {
		t.Errorf("no phase, yet: %q", s)
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + gl + "\nwant: " + wl
		}
	}
	return "(same lines, different line endings)"
}
