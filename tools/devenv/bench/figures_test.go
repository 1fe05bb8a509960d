package bench

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/testbed"
)

// The bench's pure parts: how samples become figures, figures verdicts, and metrics
// counts. None of it needs a cluster (the run itself is make bench).

func TestSummarize(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose
	}
	cases := []struct {
		name    string
		samples []time.Duration
		want    Dist
	}{
		{"none", nil, Dist{}},
		{"one", ms(7), Dist{N: 1, P50: 7, P99: 7, Max: 7}},
		{"two: p50 rounds up to the upper one", ms(2, 1), Dist{N: 2, P50: 2, P99: 2, Max: 2}},
		{"1..100 ms", ms(hundred...), Dist{N: 100, P50: 51, P99: 99, Max: 100}},
		{"microseconds kept", []time.Duration{1500 * time.Microsecond}, Dist{N: 1, P50: 1.5, P99: 1.5, Max: 1.5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := append([]time.Duration(nil), c.samples...)
			if got := summarize(c.samples); got != c.want {
				t.Errorf("summarize = %+v, want %+v", got, c.want)
			}
			for i := range in {
				if in[i] != c.samples[i] {
					t.Fatalf("summarize reordered its input")
				}
			}
		})
	}
}

func TestRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	cases := []struct {
		name       string
		ts         []time.Time
		mean, peak float64
	}{
		{"none", nil, 0, 0},
		{"one", at(0), 0, 0},
		{"two a second apart", at(0, 1000), 1, 2},
		{"a burst then a tail", at(0, 100, 200, 300, 3000), 4.0 / 3, 4},
		{"same instant", at(5, 5, 5), 0, 3},
	}
	for _, c := range cases {
		mean, peak := rates(c.ts)
		if mean != c.mean || peak != c.peak {
			t.Errorf("%s: rates = %v, %v; want %v, %v", c.name, mean, peak, c.mean, c.peak)
		}
	}
}

func TestVerdictAndNotes(t *testing.T) {
	if verdict(true) != "met" || verdict(false) != "**missed**" {
		t.Errorf("verdict: %q, %q", verdict(true), verdict(false))
	}
	cases := []struct {
		d    Dist
		want string
	}{
		{Dist{N: 40}, ""},
		{Dist{N: 40, Lost: 2}, " (2 of 40 events never came, counted at 10 s)"},
	}
	for _, c := range cases {
		if got := lostNote(c.d); got != c.want {
			t.Errorf("lostNote(%+v) = %q, want %q", c.d, got, c.want)
		}
	}
	for _, c := range []struct {
		m    map[string]float64
		want string
	}{
		{nil, "none"},
		{map[string]float64{"b": 2, "a": 1.4}, "a 1, b 2"},
	} {
		if got := kv(c.m); got != c.want {
			t.Errorf("kv(%v) = %q, want %q", c.m, got, c.want)
		}
	}
}

// met is a run whose every figure meets its target, with room on either side, so each
// case below moves one figure across one line.
func met() *Results {
	read := func(n int) ReadResult {
		return ReadResult{Containers: n, ReadLoad: ReadLoad{Get: Dist{P50: 0.3}, ListPage: Dist{P50: 1}, ListGet: Dist{P50: 0.2}}, RSSBytes: 100 << 20, IdleRSSBytes: 90 << 20}
	}
	return &Results{
		Create:     CreateResult{Post: Dist{P50: 10.4}, Raw: Dist{P50: 10}, RawParallel: Dist{P50: 10}},
		Reads:      []ReadResult{read(1000), read(10000)},
		Latency:    map[string]Dist{"debounce_500ms": {N: 40, P99: 550}, "debounce_0": {N: 40, P99: 50}},
		Throughput: []ThroughputResult{{Node: "kwok-node-1", Pods: 2600, Containers: 2500, Transport: "core NATS", LagS: 1, Latency: Dist{N: 2500, P99: 900, Max: 1500}}},
		Startup: &StartupResult{Containers: 10000, ReadyS: 3, RawSyncS: 2.5, RepublishedS: 8,
			APIServer:    map[string]float64{"LIST pods": 2, "LIST services": 1, "WATCH-LIST deployments": 1, "WATCH-LIST configmaps": 1},
			ServiceLists: map[string]float64{"WATCH pods": 1, "WATCH services": 1, "WATCH deployments": 1, "WATCH configmaps": 1},
			RSSBytes:     90 << 20, SecondRSSBytes: 80 << 20},
		Replicas: &ReplicaResult{Tries: 200, CreateAgree: Dist{P99: 50}, DeleteAgree: Dist{P99: 50}},
		Missing:  &MissingResult{Containers: 10000, ConfirmsPerGet: 1, Unknown: Dist{P50: 2}, Known: Dist{P50: 0.3}, FloodSeconds: 5, FloodConfirmsPerS: 20},
		Concurrent: &ConcurrencyResult{ServiceQPS: 100, ServiceBurst: 200, Rows: []ConcurrencyRow{
			{Clients: 8, Op: "create", Via: "api", Ops: 100, Seconds: 10, PerSecond: 10, CallsPerOp: 3},
			{Clients: 8, Op: "create", Via: "raw", Ops: 100, Seconds: 10, PerSecond: 10, CallsPerOp: 3},
			{Clients: 8, Op: "delete", Via: "api", Ops: 100, Seconds: 10, PerSecond: 10, CallsPerOp: 3},
			{Clients: 8, Op: "delete", Via: "raw", Ops: 100, Seconds: 10, PerSecond: 10, CallsPerOp: 3},
		}},
	}
}

// checkOf is the summary row whose text starts with what (it must be there once).
func checkOf(t *testing.T, r *Results, what string) check {
	t.Helper()
	var found []check
	for _, c := range checks(r) {
		if strings.HasPrefix(c.What, what) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d rows start with %q", len(found), what)
	}
	return found[0]
}

func TestChecksMeetTheirTargets(t *testing.T) {
	for _, c := range checks(met()) {
		if !c.OK {
			t.Errorf("baseline misses %q: %s against %s", c.What, c.Measured, c.Target)
		}
	}
	cases := []struct {
		name   string
		change func(r *Results)
		row    string
		ok     bool
	}{
		{"POST at exactly 1.1 × raw", func(r *Results) { r.Create.Post.P50 = 11 }, "create: POST p50 / raw client-go p50, Deployment then", true},
		{"POST over 1.1 × raw", func(r *Results) { r.Create.Post.P50 = 11.1 }, "create: POST p50 / raw client-go p50, Deployment then", false},
		{"POST at exactly 1.3 × raw in parallel", func(r *Results) { r.Create.RawParallel.P50 = 8 }, "create: POST p50 / raw client-go p50, Deployment and", true},
		{"POST over 1.3 × raw in parallel", func(r *Results) { r.Create.RawParallel.P50 = 7.9 }, "create: POST p50 / raw client-go p50, Deployment and", false},
		{"the service read from the apiserver", func(r *Results) { r.Reads[1].ServiceReads = 1 }, "reads: the service's GET/LIST", false},
		{"GET p50 at 1 ms", func(r *Results) { r.Reads[1].Get.P50 = 1 }, "reads at 10000: GET p50", false},
		{"LIST page at exactly 1.3 ×", func(r *Results) { r.Reads[1].ListPage.P50 = 1.3 }, "LIST page p50 at", true},
		{"LIST page over 1.3 ×", func(r *Results) { r.Reads[1].ListPage.P50 = 1.31 }, "LIST page p50 at", false},
		{"LIST page 2 × on a machine 2 × slower", func(r *Results) { r.Reads[1].ListPage.P50, r.Reads[1].ListGet.P50 = 2, 0.4 }, "LIST page p50 at", true},
		{"RSS at exactly 100 MB", func(r *Results) { r.Reads[1].RSSBytes = 100 << 20 }, "memory at 10000: RSS right after", true},
		{"RSS a byte over 100 MB", func(r *Results) { r.Reads[1].RSSBytes = 100<<20 + 1 }, "memory at 10000: RSS right after", false},
		{"idle RSS over 100 MB", func(r *Results) { r.Reads[0].IdleRSSBytes = 101 << 20 }, "memory at 1000: RSS idle", false},
		{"latency p99 at debounce + 100 ms", func(r *Results) { r.Latency["debounce_500ms"] = Dist{N: 40, P99: 600} }, "status latency p99, debounce 500 ms", true},
		{"latency p99 over debounce + 100 ms", func(r *Results) { r.Latency["debounce_0"] = Dist{N: 40, P99: 100.1} }, "status latency p99, debounce 0 ms", false},
		{"an event lost", func(r *Results) { r.Latency["debounce_0"] = Dist{N: 40, P99: 1, Lost: 1} }, "status latency p99, debounce 0 ms", false},
		{"burst: one container at debounce + 2 s", func(r *Results) { r.Throughput[0].Latency.Max = 2500 }, "status burst", true},
		{"burst: one container over debounce + 2 s", func(r *Results) { r.Throughput[0].Latency.Max = 2501 }, "status burst", false},
		{"burst: an event lost", func(r *Results) { r.Throughput[0].Lost = 1 }, "status burst", false},
		{"burst: no event at all", func(r *Results) { r.Throughput[0].Latency = Dist{} }, "status burst", false},
		{"ready at exactly 1.5 × the informers", func(r *Results) { r.Startup.ReadyS = 3.75 }, "start-up at 10000: process start to /readyz", true},
		{"ready over 1.5 × the informers", func(r *Results) { r.Startup.ReadyS = 3.8 }, "start-up at 10000: process start to /readyz", false},
		{"republish 10 s after ready", func(r *Results) { r.Startup.RepublishedS = 13 }, "start-up at 10000: process start to every", true},
		{"republish over 10 s after ready", func(r *Results) { r.Startup.RepublishedS = 13.1 }, "start-up at 10000: process start to every", false},
		{"a relist at start-up", func(r *Results) { r.Startup.ServiceLists["LIST pods"] = 1 }, "start-up at 10000: the service's initial lists", false},
		{"other clients' lists at start-up", func(r *Results) { r.Startup.APIServer["LIST pods"] = 9 }, "start-up at 10000: the service's initial lists", true},
		{"the second replica over 100 MB", func(r *Results) { r.Startup.SecondRSSBytes = 101 << 20 }, "second replica at 10000", false},
		{"B answered 404 after A's 201", func(r *Results) { r.Replicas.NotFoundAfterCreate = 1 }, "replicas: B answered 404", false},
		{"B agrees in exactly 100 ms", func(r *Results) { r.Replicas.CreateAgree.P99 = 100 }, "replicas: create on A", true},
		{"B takes over 100 ms to see a delete", func(r *Results) { r.Replicas.DeleteAgree.P99 = 101 }, "replicas: delete on A", false},
		{"two confirmations per unknown GET", func(r *Results) { r.Missing.ConfirmsPerGet = 2 }, "GET of an unknown id at 10000: the 404's", false},
		{"unknown GET at known + 5 ms", func(r *Results) { r.Missing.Unknown.P50 = 5.3 }, "GET of an unknown id at 10000: p50", true},
		{"unknown GET over known + 5 ms", func(r *Results) { r.Missing.Unknown.P50 = 5.4 }, "GET of an unknown id at 10000: p50", false},
		// The limiter's bound: 20/s plus the burst of 40 spread over the 5 s flood = 28/s.
		{"flood at the limiter's bound", func(r *Results) { r.Missing.FloodConfirmsPerS = 28 }, "GETs of unknown ids from 8 clients", true},
		{"flood over the limiter's bound", func(r *Results) { r.Missing.FloodConfirmsPerS = 28.1 }, "GETs of unknown ids from 8 clients", false},
		{"concurrent API creates at exactly 0.9 × raw", func(r *Results) { r.Concurrent.Rows[0].PerSecond = 9 }, "concurrent creates, 8 clients: API", true},
		{"concurrent API creates below 0.9 × raw", func(r *Results) { r.Concurrent.Rows[0].PerSecond = 8.9 }, "concurrent creates, 8 clients: API", false},
		{"concurrent API deletes below 0.9 × raw", func(r *Results) { r.Concurrent.Rows[2].PerSecond = 8.9 }, "concurrent deletes, 8 clients: API", false},
		// Requests per operation: the service's whole count during its batches.
		{"3 requests per create", func(r *Results) { r.Concurrent.Rows[0].CallsPerOp = 3 }, "concurrent creates, 8 clients: the service's Kubernetes requests", true},
		{"over 3 requests per create (a renewal)", func(r *Results) { r.Concurrent.Rows[0].CallsPerOp = 3.01 }, "concurrent creates, 8 clients: the service's Kubernetes requests", false},
		{"5 requests per delete, the controller's included", func(r *Results) { r.Concurrent.Rows[2].CallsPerOp = 5 }, "concurrent deletes, 8 clients: the service's Kubernetes requests", true},
		{"over 5 requests per delete", func(r *Results) { r.Concurrent.Rows[2].CallsPerOp = 5.01 }, "concurrent deletes, 8 clients: the service's Kubernetes requests", false},
		{"no delete measured", func(r *Results) { r.Concurrent.Rows[2].Ops, r.Concurrent.Rows[2].CallsPerOp = 0, 0 }, "concurrent deletes, 8 clients: the service's Kubernetes requests", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := met()
			c.change(r)
			if got := checkOf(t, r, c.row); got.OK != c.ok {
				t.Errorf("%q: %s against %s: met = %v, want %v", got.What, got.Measured, got.Target, got.OK, c.ok)
			}
		})
	}
}

// The concurrency rows say when raw client-go paid for the finalizer too.
func TestConcurrencyRowsSayWhatRawWrote(t *testing.T) {
	r := met()
	const what = "concurrent deletes, 8 clients: API deletes/s"
	if c := checkOf(t, r, what); strings.Contains(c.Limit, "finalizer") {
		t.Errorf("without the raw finalizer: %q", c.Limit)
	}
	r.Concurrent.RawFinalizer = true
	if c := checkOf(t, r, what); !strings.Contains(c.Limit, "raw's records carry the finalizer") {
		t.Errorf("with the raw finalizer: %q", c.Limit)
	}
}

// A section that was not measured has no rows: nothing to meet or miss.
func TestChecksSkipWhatWasNotMeasured(t *testing.T) {
	r := met()
	r.Create.RawParallel = Dist{}
	r.Reads = r.Reads[:1]
	r.Latency = map[string]Dist{}
	r.Throughput, r.Startup, r.Replicas, r.Missing, r.Concurrent = nil, nil, nil, nil, nil
	var got []string
	for _, c := range checks(r) {
		got = append(got, c.What)
	}
	want := []string{
		"create: POST p50 / raw client-go p50, Deployment then Service",
		"reads: the service's GET/LIST of deployments, pods, services during the read phases (apiserver audit log)",
		"reads at 1000: GET p50",
		"memory at 1000: RSS idle",
		"memory at 1000: RSS right after the read load",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMetricsCounts(t *testing.T) {
	prom := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="pods",verb="LIST"} 3
apiserver_request_total{code="200",resource="pods",verb="GET"} 2
apiserver_request_total{code="200",resource="deployments",verb="GET"} 5
apiserver_request_total{code="200",resource="configmaps",verb="GET"} 7
apiserver_request_total{code="201",resource="services",verb="POST"} 11
apiserver_watch_list_duration_seconds_count{resource="pods"} 1
sp_kubernetes_requests_total{client="confirm",code="404",method="GET",resource="configmaps"} 4
sp_kubernetes_requests_total{client="service",code="200",method="GET",resource="configmaps"} 6
sp_kubernetes_requests_total{client="service",code="201",method="POST",resource="deployments"} 9
sp_kubernetes_requests_total{client="election",code="200",method="PUT",resource="configmaps"} 2
sp_kubernetes_requests_total{client="service",code="200",method="GET",resource="none"} 1
sp_kubernetes_requests_total{client="service",code="200",method="WATCH",resource="pods"} 3
not_a_number{x="y"} NaNx
`
	m, err := testbed.ParseProm(strings.NewReader(prom))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m[`not_a_number{x="y"}`]; ok {
		t.Errorf("a sample that is not a number was kept")
	}
	n, by := readRequests(m)
	if wantBy := map[string]float64{"LIST pods": 3, "GET pods": 2, "GET deployments": 5}; n != 10 || !maps.Equal(by, wantBy) {
		t.Errorf("readRequests = %v, %v; want 10, %v", n, by, wantBy)
	}
	if got := serviceKubeRequests(m); got != 25 {
		t.Errorf("serviceKubeRequests = %v, want 25", got)
	}
	if got := confirmations(m); got != 4 {
		t.Errorf("confirmations = %v, want 4 (GETs answered 404)", got)
	}
	if got := recordGets(m); got != 7 {
		t.Errorf("recordGets = %v, want 7", got)
	}
	if got, want := startupRequests(m), map[string]float64{"LIST pods": 3, "WATCH-LIST pods": 1}; !maps.Equal(got, want) {
		t.Errorf("startupRequests = %v, want %v", got, want)
	}
	if got, want := apiserverRequests(m), map[string]float64{"LIST pods": 3, "GET pods": 2, "GET deployments": 5, "GET configmaps": 7, "POST services": 11}; !maps.Equal(got, want) {
		t.Errorf("apiserverRequests = %v, want %v", got, want)
	}
	for _, c := range []struct {
		keep func(string, string, string) bool
		want map[string]float64
	}{
		{allRequests, map[string]float64{"GET": 11, "POST": 9, "PUT": 2, "WATCH": 3}},
		{notBackground, map[string]float64{"GET": 10, "POST": 9}},
		{background, map[string]float64{"GET": 1, "PUT": 2, "WATCH": 3}},
	} {
		if got := serviceRequestsByMethod(m, c.keep); !maps.Equal(got, c.want) {
			t.Errorf("serviceRequestsByMethod = %v, want %v", got, c.want)
		}
	}
}

func TestReadsOf(t *testing.T) {
	m0 := map[string]float64{
		`sp_kubernetes_requests_total{client="service",code="200",method="GET",resource="configmaps"}`:  2,
		`sp_kubernetes_requests_total{client="service",code="201",method="POST",resource="configmaps"}`: 5,
	}
	m1 := map[string]float64{
		`sp_kubernetes_requests_total{client="service",code="200",method="GET",resource="configmaps"}`:  3,
		`sp_kubernetes_requests_total{client="confirm",code="404",method="GET",resource="configmaps"}`:  1,
		`sp_kubernetes_requests_total{client="service",code="201",method="POST",resource="configmaps"}`: 9,
		`sp_kubernetes_requests_total{client="service",code="200",method="WATCH",resource="pods"}`:      1,
	}
	got := strings.Join(readsOf(m0, m1), "; ")
	want := `{client="confirm",code="404",method="GET",resource="configmaps"} 1; {client="service",code="200",method="GET",resource="configmaps"} 1`
	if got != want {
		t.Errorf("readsOf = %s\nwant %s", got, want)
	}
}

func TestCPUUse(t *testing.T) {
	t0 := time.Unix(0, 0)
	a := cpuSample{at: t0, procs: map[string]float64{"sp": 1, "kube-apiserver": 2}, busy: 10}
	b := cpuSample{at: t0.Add(2 * time.Second), procs: map[string]float64{"sp": 2, "kube-apiserver": 3}, busy: 13}
	got := cpuUse(a, b)
	want := map[string]float64{"sp": 50, "kube-apiserver": 50, "machine": 150, "other processes": 50}
	if !maps.Equal(got, want) {
		t.Errorf("cpuUse = %v, want %v", got, want)
	}
	// The machine counted less than the run's processes (sampling skew): never negative.
	b.busy = 11
	if got := cpuUse(a, b)["other processes"]; got != 0 {
		t.Errorf("other processes = %v, want 0", got)
	}
}

func TestParsePprofTop(t *testing.T) {
	out := []byte(`File: k8s-container-sp
Type: inuse_space
Showing nodes accounting for 40.5MB, 90.00% of 45MB total
      flat  flat%   sum%        cum   cum%
   20.5MB 45.56% 45.56%    20.5MB 45.56%  k8s.io/client-go/tools/cache.(*threadSafeMap).Add
      10MB 22.22% 67.78%       30MB 66.67%  encoding/json.(*decodeState).object
`)
	entries, total, err := parsePprofTop(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []HeapEntry{
		{FlatMB: 20.5, FlatPct: 45.56, CumMB: 20.5, CumPct: 45.56, Func: "k8s.io/client-go/tools/cache.(*threadSafeMap).Add"},
		{FlatMB: 10, FlatPct: 22.22, CumMB: 30, CumPct: 66.67, Func: "encoding/json.(*decodeState).object"},
	}
	if total != 45 || len(entries) != len(want) || entries[0] != want[0] || entries[1] != want[1] {
		t.Errorf("parsePprofTop = %+v, %v; want %+v, 45", entries, total, want)
	}
}

// A phase's counts are what grew during it; a count that did not change is not one.
func TestGrown(t *testing.T) {
	got := grown(map[string]float64{"GET": 2, "POST": 5, "PUT": 1}, map[string]float64{"GET": 7, "POST": 5, "DELETE": 3})
	if want := map[string]float64{"GET": 5, "DELETE": 3}; !maps.Equal(got, want) {
		t.Errorf("grown = %v, want %v", got, want)
	}
}
