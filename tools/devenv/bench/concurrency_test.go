package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/metrics"
)

func TestConcurrencyRounds(t *testing.T) {
	cases := []struct {
		name       string
		n, clients int
		want       []int
	}{
		{"nothing", 0, 8, nil},
		{"8 clients: 4 rounds, each side first twice", 128, 8, []int{32, 32, 32, 32}},
		{"32 clients: 2 rounds of 64", 128, 32, []int{64, 64}},
		{"64 clients: 2 rounds, each of 64 at once", 128, 64, []int{64, 64}},
		{"too few for 2 rounds of 64: one round", 96, 64, []int{96}},
		{"fewer than the clients: one round", 10, 8, []int{10}},
		{"uneven split keeps every operation", 101, 8, []int{25, 25, 25, 26}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := concurrencyRounds(c.n, c.clients)
			sum := 0
			for _, s := range got {
				sum += s
			}
			if len(got) != len(c.want) || sum != c.n {
				t.Fatalf("concurrencyRounds(%d, %d) = %v, want %v", c.n, c.clients, got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("concurrencyRounds(%d, %d) = %v, want %v", c.n, c.clients, got, c.want)
				}
			}
		})
	}
}

func TestConcurrencyOps(t *testing.T) {
	for _, c := range []struct{ n, clients, want int }{{96, 8, 96}, {96, 32, 256}, {96, 64, 512}, {600, 64, 600}} {
		if got := concurrencyOps(c.n, c.clients); got != c.want {
			t.Errorf("concurrencyOps(%d, %d) = %d, want %d", c.n, c.clients, got, c.want)
		}
	}
}

func TestLimiterFloor(t *testing.T) {
	cases := []struct {
		name                    string
		calls, qps, burst, want float64
	}{
		{"within the burst", 200, 100, 200, 0},
		{"above it at QPS", 512, 100, 200, 3.12},
		{"no limiter", 512, 0, 0, 0},
	}
	for _, c := range cases {
		if got := limiterFloor(c.calls, c.qps, c.burst); got != c.want {
			t.Errorf("%s: limiterFloor = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestConcurrencyVerdict(t *testing.T) {
	raw := ConcurrencyRow{Clients: 64, Op: "create", Via: "raw", Ops: 128, Seconds: 4, PerSecond: 32, CallsPerOp: 3}
	api := func(perS, floor, calls float64) ConcurrencyRow {
		return ConcurrencyRow{Clients: 64, Op: "create", Via: "api", Ops: 128, Seconds: 128 / perS, PerSecond: perS,
			CallsPerOp: calls, CallsBy: map[string]float64{"POST": 3 * 128, "GET": (calls - 3) * 128}, LimiterFloorS: floor}
	}
	busy := func(r ConcurrencyRow, machine, service float64) ConcurrencyRow {
		r.CPUS = map[string]float64{"machine": machine, "service": service, "kube-apiserver": machine / 2}
		return r
	}
	spread := func(r ConcurrencyRow, rates ...float64) ConcurrencyRow {
		r.BatchRates = rates
		return r
	}
	runs := func(r ConcurrencyRow, rates ...float64) ConcurrencyRow {
		r.RunRates = rates
		return r
	}
	cases := []struct {
		name     string
		api, raw ConcurrencyRow
		throttle int
		ok       bool
		reason   []string // substrings of the reason; none: empty
		// notLimiter: the reason must not name the limiter.
		notLimiter bool
	}{
		{"at 0.9 × raw", api(28.8, 0, 4), raw, 0, true, nil, false},
		{"above raw", api(40, 0, 4), raw, 0, true, nil, false},
		{"below, the limiter's floor near the time taken", api(20, 5.6, 4), raw, 0, false,
			[]string{"client limiter (100 requests/s, burst 200)", "no less than 5.6 s of the 6.4 s", "4.0 Kubernetes requests per create against raw's 3"}, false},
		{"below, the limiter's floor half the time taken", api(20, 3.2, 4), raw, 0, false, []string{"client limiter", "no less than 3.2 s of the 6.4 s"}, false},
		{"below, the limiter's floor under half: more requests only", api(20, 3.1, 4), raw, 0, false, []string{"4.0 Kubernetes requests per create against raw's 3 (GET 128, POST 384)"}, true},
		{"below, only the throttle log", api(20, 1, 3), raw, 2, false, []string{"says 2 times that client-go waited"}, false},
		{"below, only more requests", api(20, 1, 4), raw, 0, false, []string{"4.0 Kubernetes requests per create against raw's 3 (GET 128, POST 384)"}, false},
		{"below, nothing measured", api(20, 1, 3), raw, 0, false, nil, false},
		{"no raw figure", api(20, 0, 4), ConcurrencyRow{}, 0, false, nil, false},
		{"below, every CPU busy", busy(api(20, 1, 3), 12.8, 2.048), raw, 0, false,
			[]string{"the machine's 2 CPUs were busy (100%) and the service used 16% of that, 16.0 ms of CPU per create"}, false},
		{"below, a CPU idle at times", busy(api(20, 1, 3), 11, 2.048), raw, 0, false, nil, false},
		{"below, raw's batches apart", api(20, 1, 3), spread(raw, 36.4, 24.8, 32.7, 25.1), 0, false,
			[]string{"raw client-go's own batches ran at 24.8 to 36.4/s (the slowest 0.68 of the fastest)"}, false},
		// With runs on both sides, the median run decides, not the batches together.
		{"one slow run of three", runs(api(20, 1, 3), 30, 30, 10), runs(raw, 32, 32, 32), 0, true, nil, false},
		{"two slow runs of three", runs(api(40, 1, 3), 25, 26, 40), runs(raw, 32, 32, 32), 0, false, nil, false},
		{"below, the rounds apart", spread(runs(api(20, 1, 3), 25, 26), 25, 26, 27, 80), spread(runs(raw, 32, 32), 32, 32, 32, 32), 0, false,
			[]string{"the 4 rounds' ratios ran from 0.78 to 2.50"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ok, reason := concurrencyVerdict(c.api, c.raw, 100, 200, c.throttle, 2)
			if c.notLimiter && strings.Contains(reason, "limiter") {
				t.Errorf("reason %q names the limiter", reason)
			}
			if ok != c.ok {
				t.Errorf("ok = %v, want %v", ok, c.ok)
			}
			if len(c.reason) == 0 && reason != "" {
				t.Errorf("reason %q, want none", reason)
			}
			for _, s := range c.reason {
				if !strings.Contains(reason, s) {
					t.Errorf("reason %q lacks %q", reason, s)
				}
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := roundRatios(ConcurrencyRow{BatchRates: []float64{1, 2}}, ConcurrencyRow{BatchRates: []float64{2}}); got != nil {
		t.Errorf("rounds of different counts paired: %v", got)
	}
}

// A requests row counts what the phase counted, the background requests (election,
// health probe, watches) shown beside it and not counted.
func TestCallsCheck(t *testing.T) {
	create := ConcurrencyRow{Clients: 8, Op: "create", Via: "api", Ops: 100, Seconds: 10, CallsPerOp: 3.05,
		CallsBy: map[string]float64{"POST": 300, "GET": 5}, BackgroundCalls: 5}
	_, measured, limit, target, ok := callsCheck(create)
	if ok || target != "≤ 3" || !strings.Contains(limit, "raw client-go: 3 (the record, then the Deployment and the Service)") ||
		measured != "**3.05** (GET 5, POST 300 over 100 creates); background, not counted: 5 over the batches' 10.0 s" {
		t.Errorf("create: %q, %q, %q, %v", measured, limit, target, ok)
	}
	del := ConcurrencyRow{Clients: 8, Op: "delete", Via: "api", Ops: 100, Seconds: 10, CallsPerOp: 4,
		CallsBy: map[string]float64{"DELETE": 200, "GET": 100, "PATCH": 100}}
	_, measured, limit, target, ok = callsCheck(del)
	if !ok || target != "≤ 5: 3 on the request path + the controller's 2" || !strings.Contains(limit, "raw client-go: 3 (the record, the Deployment and the Service)") ||
		measured != "**4.00** (DELETE 200, GET 100, PATCH 100 over 100 deletes); background, not counted: 0 over the batches' 10.0 s" {
		t.Errorf("delete: %q, %q, %q, %v", measured, limit, target, ok)
	}
}

// concurrencySample is a phase "concurrency" (made up, not measured): 64 clients' API
// creates miss their target, held by the service's limiter.
func concurrencySample() *ConcurrencyResult {
	cr := &ConcurrencyResult{ServiceQPS: 100, ServiceBurst: 200, PodsBefore: 1200, CleanupS: 12.5, SettleS: 8, PhaseS: 85}
	for _, c := range concurrencyClients {
		for _, op := range []string{"create", "delete"} {
			calls, perS := 4.0, 30.0
			by := map[string]float64{"POST": 384, "GET": 128}
			if op == "delete" {
				calls, by = 8, map[string]float64{"GET": 384, "POST": 128, "PUT": 128, "DELETE": 256, "PATCH": 128}
			}
			floor := 0.0
			if c == 64 {
				perS, floor = 20, 5.9
			}
			cr.Rows = append(cr.Rows,
				ConcurrencyRow{Clients: c, Op: op, Via: "api", Ops: 128, Rounds: len(concurrencyRounds(128, c)), Seconds: 128 / perS, PerSecond: perS,
					Latency: Dist{N: 128, P50: float64(c) * 4, P99: float64(c) * 9, Max: float64(c) * 10}, CallsPerOp: calls, CallsBy: by, LimiterFloorS: floor},
				ConcurrencyRow{Clients: c, Op: op, Via: "raw", Ops: 128, Rounds: len(concurrencyRounds(128, c)), Seconds: 4, PerSecond: 32,
					Latency: Dist{N: 128, P50: float64(c) * 3, P99: float64(c) * 7, Max: float64(c) * 8}, CallsPerOp: 3})
		}
	}
	// The 8-client creates ran in two runs of two rounds: the median run decides.
	api, raw := &cr.Rows[0], &cr.Rows[1]
	api.BatchRates, raw.BatchRates = []float64{30, 24, 31, 29}, []float64{32, 32, 32, 32}
	api.RunRates, raw.RunRates = []float64{28.8, 30}, []float64{32, 32}
	return cr
}

// sp-bench -only=concurrency prints the same section the full report has.
func TestConcurrencyMarkdown(t *testing.T) {
	r := loadResults(t)
	r.Concurrent = concurrencySample()
	section := ConcurrencyMarkdown(r)
	if !strings.HasPrefix(section, "## 1b. Creates and deletes from many clients at once\n") ||
		!strings.Contains(section, "64 clients, creates, target ≥ 0.9 missed: 4.0 Kubernetes requests per create against raw's 3 (GET 128, POST 384); the service's Kubernetes client limiter") {
		t.Errorf("section:\n%s", section)
	}
	if full := Markdown(r, ""); !strings.Contains(full, section) {
		t.Errorf("the full report does not hold the section")
	}
	r.Concurrent = nil
	if s := ConcurrencyMarkdown(r); s != "" {
		t.Errorf("no phase, yet: %q", s)
	}
}

// A row's CPU is each process's seconds over its batches' wall time, the largest first.
func TestCPULine(t *testing.T) {
	row := &ConcurrencyRow{Seconds: 2}
	t0 := time.Unix(0, 0)
	addCPU(row, cpuSample{at: t0, procs: map[string]float64{"service": 1, "kube-apiserver": 2}, busy: 10},
		cpuSample{at: t0.Add(2 * time.Second), procs: map[string]float64{"service": 1.5, "kube-apiserver": 4}, busy: 13})
	if got, want := cpuLine(row), "over 2.0 s: machine 150%, kube-apiserver 100%, service 25%"; got != want {
		t.Errorf("cpuLine = %q, want %q", got, want)
	}
	if got := cpuLine(&ConcurrencyRow{}); got != "-" {
		t.Errorf("no batches: %q", got)
	}
}

// The requests that come at their own pace are not counted against an operation.
func TestBackgroundRequests(t *testing.T) {
	for _, c := range []struct {
		client, resource, method string
		want                     bool
	}{
		{metrics.ClientElection, "configmaps", "PUT", true},
		{"service", "none", "GET", true},
		{"service", "selfsubjectaccessreviews", "POST", true},
		{"service", "pods", "WATCH", true},
		{"service", "configmaps", "PATCH", false},
		{"service", "deployments", "POST", false},
	} {
		if got := background(c.client, c.resource, c.method); got != c.want {
			t.Errorf("background(%q, %q, %q) = %v, want %v", c.client, c.resource, c.method, got, c.want)
		}
	}
}
