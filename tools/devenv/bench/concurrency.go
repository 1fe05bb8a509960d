package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/dcm-project/k8s-container-sp/internal/app"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// PhaseConcurrency is the phase "creates and deletes from many clients at once"
// (-only=concurrency).
const PhaseConcurrency = "concurrency"

// concurrencyClients are the client counts the phase measures at.
var concurrencyClients = []int{8, 32, 64}

// rawCallsPerCreate and rawCallsPerDelete are the raw side's Kubernetes requests per
// container, the request path's of a POST and a DELETE (rawCreateAsService,
// rawDeleteAsService): the record, then the Deployment and the Service at once; the
// record, the Deployment and the Service at once. No controller follows the raw side's
// deletes.
const (
	rawCallsPerCreate = 3
	rawCallsPerDelete = 3
)

// DefaultConcurrencyN is the phase's creates (then deletes) per client count and side:
// at 8 clients 96 made delete batches of 24 that took a fifth of a second, as far apart
// between runs as the sides.
const DefaultConcurrencyN = 192

// DefaultConcurrencyRuns is how many times the phase runs. One run's ratio moved by 0.2
// to 0.4 between runs of the same code on 2 CPUs, so its verdict is the median run's
// (concurrencyVerdict).
const DefaultConcurrencyRuns = 3

// concurrencyRunsOf is the phase's runs o asks for.
func concurrencyRunsOf(o Options) int {
	if o.ConcurrencyRuns > 0 {
		return o.ConcurrencyRuns
	}
	return DefaultConcurrencyRuns
}

// concurrencyOps is how many operations each side makes at clients clients: n, but at
// least eight per client, so that the four rounds (concurrencyRounds) each give every
// client two. A round of one operation per client times its slowest operation, not a
// rate: with 96 operations at 32 clients (three such rounds per side) the ratio to raw
// moved by up to 0.35 between runs of the same code.
func concurrencyOps(n, clients int) int { return max(n, 8*clients) }

// concurrencyStream is the JetStream stream the phase makes for its duration.
const concurrencyStream = "BENCH_CONC_DCM_CONTAINER"

// concurrencyRawNS is where the raw side's containers go (the API's go to the
// service's namespace).
const concurrencyRawNS = "bench-conc-raw"

// ConcurrencyResult is the phase "creates and deletes from many clients at once": the
// API against raw client-go making (and then deleting) the same objects, at each
// client count.
type ConcurrencyResult struct {
	Rows []ConcurrencyRow `json:"rows"`
	// ServiceQPS and ServiceBurst are the service's Kubernetes client limiter
	// (app.RESTConfig): every request it makes waits there, the controller's included.
	ServiceQPS   float64 `json:"service_client_qps"`
	ServiceBurst float64 `json:"service_client_burst"`
	// PodsBefore: pods in the service's namespace when the phase began (the controllers
	// and the service's informers carry them; the raw namespace starts empty).
	PodsBefore int `json:"pods_in_service_namespace_before"`
	// ThrottleLogs: lines of the service's log during the phase saying client-go
	// waited a second or more for its limiter (client-go logs at most one per 10 s).
	ThrottleLogs int `json:"service_throttle_log_lines"`
	// CleanupS: from the last delete until every pod and record the phase made was
	// gone; SettleS: then until the control plane was quiet.
	CleanupS float64 `json:"cleanup_s"`
	// PodsLeft and RecordsLeft: what was still there when the wait gave up (2 min).
	PodsLeft    int     `json:"pods_left,omitempty"`
	RecordsLeft int     `json:"records_left,omitempty"`
	SettleS     float64 `json:"settle_s"`
	PhaseS      float64 `json:"phase_s"`
	// CPUs: the machine's CPUs (what "busy" in a row's CPU is out of).
	CPUs int `json:"cpus,omitempty"`
	// RawFinalizer: the raw side wrote the finalizer's cost too (Env.RawFinalizer).
	RawFinalizer bool `json:"raw_finalizer,omitempty"`
}

// ConcurrencyRow is one (client count, operation, side): its batches summed.
type ConcurrencyRow struct {
	Clients int    `json:"clients"`
	Op      string `json:"op"`  // "create" or "delete"
	Via     string `json:"via"` // "api" or "raw"
	Ops     int    `json:"ops"`
	Rounds  int    `json:"rounds"`
	// Seconds: the batches' wall time, summed (each from its first request to its last
	// answer); PerSecond = Ops / Seconds.
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"ops_per_s"`
	Latency   Dist    `json:"latency"`
	// BatchRates: each batch's operations per second, in the order they ran; the API's
	// and raw's of one round (one batch each, one after the other) have the same index.
	BatchRates []float64 `json:"batch_ops_per_s,omitempty"`
	// RunRates: each run's operations per second (its batches' operations over their
	// seconds), in the order they ran: the spread between runs.
	RunRates []float64 `json:"run_ops_per_s,omitempty"`
	// Retried: answers 503 (the service's in-flight cap) retried after Retry-After.
	Retried int `json:"retried_503,omitempty"`
	// SettleS: the waits after its batches, summed, until the work they left (the
	// controllers', the status events) was done (afterBatch).
	SettleS float64 `json:"settle_after_batches_s"`
	// CallsPerOp: Kubernetes requests per operation: the service's own count during
	// its batches and the waits after them (everything it sent meanwhile, the
	// controller's finalizing PATCHes too, but the background
	// requests: the leader election's, the health probe's, the permission check's and
	// the informers' watches),
	// or the raw side's fixed number.
	CallsPerOp float64 `json:"kubernetes_calls_per_op"`
	// CallsBy: the service's requests during its batches, by method, the background
	// ones left out (API rows).
	CallsBy map[string]float64 `json:"service_kubernetes_requests_by_method,omitempty"`
	// BackgroundCalls: the background requests during the batches: the leader
	// election's (its lock's renewals, about one every election.RetryPeriod), the
	// health probe's (one every 5 s), the permission check's (every 5 minutes) and the
	// informers' watches (each started again every 5 to 10 minutes), whatever the load
	// (API rows).
	BackgroundCalls float64 `json:"background_requests,omitempty"`
	// LimiterFloorS: the least time the service's limiter lets its batches take,
	// summed: the requests above the burst at QPS each (API rows).
	LimiterFloorS float64 `json:"limiter_floor_s,omitempty"`
	// CPUS: the CPU each process of the run used during the row's batches, in seconds
	// (the service, the control plane's, the benchmark's own with NATS, and "machine":
	// every CPU's busy time); the batches' wall time is Seconds. Where the service's
	// share goes while the apiserver needs both CPUs is what a create through it costs
	// beyond raw's.
	CPUS map[string]float64 `json:"cpu_s,omitempty"`
}

// concurrencyID is the id of container i of the batches at clients clients in run run
// (both sides use the same ids, each in its own namespace).
func concurrencyID(run, clients, i int) string {
	return fmt.Sprintf("conc-%d-%02d-%04d", run, clients, i)
}

// concurrencyRounds splits n operations into rounds of at least clients operations each
// (fewer would not keep every client busy), at least 2 so that each side goes first
// once, at most 4: it returns the rounds' sizes.
func concurrencyRounds(n, clients int) []int {
	if n <= 0 {
		return nil
	}
	rounds := min(4, max(2, n/(2*clients)))
	for rounds > 1 && n/rounds < clients {
		rounds--
	}
	var out []int
	for r := range rounds {
		out = append(out, (n*(r+1))/rounds-(n*r)/rounds)
	}
	return out
}

// limiterFloor is the least time a token bucket (qps, burst, full at the start) lets
// calls requests take.
func limiterFloor(calls, qps, burst float64) float64 {
	if qps <= 0 || calls <= burst {
		return 0
	}
	return (calls - burst) / qps
}

// rawContainer is what the raw side made of one container: the names and UIDs to
// delete, in the service's order.
type rawContainer struct {
	record, service, deployment   string
	recordUID, serviceUID, depUID types.UID
}

// concurrentSide is one side's create and delete of container id.
type concurrentSide struct {
	via            string
	create, delete func(ctx context.Context, id string) (retried int, err error)
}

// Concurrency measures, runs times over, creates and then deletes at each client count in
// concurrencyClients, concurrencyOps(n, clients) of each per side, API and raw interleaved in rounds (who goes
// first alternates, so the controllers' work after one side's creates loads the other
// side's next batch as often as its own). Every container it makes is deleted by its
// delete batches; it returns once their pods and records are gone and the control
// plane is quiet.
func (e *Env) Concurrency(ctx context.Context, s *Service, serviceNS string, n, runs int) (res ConcurrencyResult, err error) {
	start := time.Now()
	cfg, err := config.Load(s.Env)
	if err != nil {
		return res, err
	}
	rc, err := app.RESTConfig(cfg)
	if err != nil {
		return res, err
	}
	res.ServiceQPS, res.ServiceBurst = float64(rc.QPS), float64(rc.Burst)
	res.CPUs, res.RawFinalizer = runtime.NumCPU(), e.RawFinalizer
	if err := harness.EnsureNamespace(ctx, e.Admin, concurrencyRawNS); err != nil {
		return res, err
	}
	md, err := metadata.NewForConfig(e.RC)
	if err != nil {
		return res, err
	}
	before, err := e.countPods(ctx, md, serviceNS, func(string) bool { return true })
	if err != nil {
		return res, err
	}
	res.PodsBefore = before
	logFrom := logSize(s.Log)

	// A JetStream stream captures the status events, as DCM's registry makes one: the
	// service deletes a deleted container's record only once a stream has stored its
	// DELETED. Without one every API-deleted record stays, owing its DELETED, and the
	// controller retries it (3 reads each time) for as long as the service runs: on the
	// service's limiter, in this phase's later batches and every later phase.
	js, err := jetstream.New(e.NC)
	if err != nil {
		return res, err
	}
	if _, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: concurrencyStream, Subjects: []string{status.Subject},
		Storage: jetstream.FileStorage, MaxBytes: 128 << 20}); err != nil {
		return res, err
	}
	streamMade := time.Now()
	defer func() {
		if derr := js.DeleteStream(context.WithoutCancel(ctx), concurrencyStream); derr != nil {
			fmt.Fprintln(e.Log, "bench: concurrency: deleting the stream:", derr)
		}
	}()

	var mu sync.Mutex
	raw := map[string]rawContainer{}
	made := map[string]bool{} // API ids created and not yet deleted
	api := concurrentSide{via: "api",
		create: func(_ context.Context, id string) (int, error) {
			retried, err := s.send(http.MethodPost, "/api/v1alpha1/containers?id="+id, specJSON("app"), http.StatusCreated)
			if err == nil {
				mu.Lock()
				made[id] = true
				mu.Unlock()
			}
			return retried, err
		},
		delete: func(_ context.Context, id string) (int, error) {
			retried, err := s.send(http.MethodDelete, "/api/v1alpha1/containers/"+id, nil, http.StatusNoContent)
			if err == nil {
				mu.Lock()
				delete(made, id)
				mu.Unlock()
			}
			return retried, err
		}}
	rawSide := concurrentSide{via: "raw",
		create: func(ctx context.Context, id string) (int, error) {
			c, err := e.rawCreateAsService(ctx, concurrencyRawNS, id)
			if err == nil {
				mu.Lock()
				raw[id] = c
				mu.Unlock()
			}
			return 0, err
		},
		delete: func(ctx context.Context, id string) (int, error) {
			mu.Lock()
			c := raw[id]
			mu.Unlock()
			err := e.rawDeleteAsService(ctx, concurrencyRawNS, c)
			if err == nil {
				mu.Lock()
				delete(raw, id)
				mu.Unlock()
			}
			return 0, err
		}}
	// Whatever a failure left behind is deleted too: thousands of pods would slow
	// every later phase.
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for id := range made {
			_, _ = api.delete(cctx, id)
		}
		for id := range raw {
			_, _ = rawSide.delete(cctx, id)
		}
	}()

	type rowKey struct {
		clients int
		op, via string
	}
	rows := map[rowKey]*ConcurrencyRow{}
	samples := map[rowKey][]time.Duration{}
	for _, clients := range concurrencyClients {
		for _, op := range []string{"create", "delete"} {
			for _, via := range []string{"api", "raw"} {
				rows[rowKey{clients, op, via}] = &ConcurrencyRow{Clients: clients, Op: op, Via: via, CallsBy: map[string]float64{}}
			}
		}
	}
	first := 0 // which side goes first in a round; alternates across every round
	for run := range runs {
		for _, clients := range concurrencyClients {
			for _, op := range []string{"create", "delete"} {
				if op == "create" {
					// The controller finalizes the records of the previous deletes (a PATCH
					// each, once their DELETED is out): that work is those deletes', not
					// these creates', so the batches wait for it.
					if werr := waitUntil(ctx, time.Minute, func() bool { return e.deletesFinalized(ctx, serviceNS) }); werr != nil {
						fmt.Fprintln(e.Log, "bench: concurrency: records of deleted containers still there after a minute; going on")
					}
				}
				if op == "delete" {
					// The service asks whether a stream captures the subject at most every 5 s.
					if w := 6*time.Second - time.Since(streamMade); w > 0 {
						time.Sleep(w)
					}
				}
				type mark struct {
					ops     int
					seconds float64
				}
				began := map[string]mark{}
				for _, via := range []string{"api", "raw"} {
					r := rows[rowKey{clients, op, via}]
					began[via] = mark{r.Ops, r.Seconds}
				}
				from := 0
				for _, size := range concurrencyRounds(concurrencyOps(n, clients), clients) {
					sides := []concurrentSide{api, rawSide}
					if first%2 == 1 {
						sides[0], sides[1] = sides[1], sides[0]
					}
					first++
					for _, side := range sides {
						k := rowKey{clients, op, side.via}
						row := rows[k]
						f := side.create
						if op == "delete" {
							f = side.delete
						}
						m0, err := s.Metrics()
						if err != nil {
							return res, err
						}
						a0, err := e.APIServerMetrics(ctx)
						if err != nil {
							return res, err
						}
						c0 := e.sampleCPU(map[string]*Service{"service": s})
						d, took, retried, err := batch(ctx, clients, from, from+size, func(ctx context.Context, i int) (int, error) {
							return f(ctx, concurrencyID(run, clients, i))
						})
						if err != nil {
							return res, fmt.Errorf("%s %s, %d clients: %w", side.via, op, clients, err)
						}
						c1 := e.sampleCPU(map[string]*Service{"service": s})
						a1, err := e.APIServerMetrics(ctx)
						if err != nil {
							return res, err
						}
						settled, err := e.afterBatch(ctx, s)
						if err != nil {
							return res, err
						}
						row.SettleS += settled.Seconds()
						m1, err := s.Metrics()
						if err != nil {
							return res, err
						}
						addCPU(row, c0, c1)
						rate := float64(size) / took.Seconds()
						// Each batch in the log: how far one batch of a side is from the next
						// says how far apart the two sides must be to mean anything.
						fmt.Fprintf(e.Log, "bench: concurrency: %d clients, %s via %s: %d in %.2f s (%.1f/s); CPU s: machine %.2f, kube-apiserver %.2f, service %.2f\n",
							clients, op, side.via, size, took.Seconds(), rate,
							c1.busy-c0.busy, c1.procs["kube-apiserver"]-c0.procs["kube-apiserver"], c1.procs["service"]-c0.procs["service"])
						// What the apiserver served meanwhile, every client's: a slow batch's own
						// requests, or the controllers' work on its objects caught up in it.
						fmt.Fprintf(e.Log, "bench: concurrency: %d clients, %s via %s: the apiserver served %s\n",
							clients, op, side.via, kv(grown(apiserverRequests(a0), apiserverRequests(a1))))
						samples[k] = append(samples[k], d...)
						row.BatchRates = append(row.BatchRates, rate)
						row.Ops += size
						row.Rounds++
						row.Seconds += took.Seconds()
						row.Retried += retried
						if side.via == "api" {
							var calls, bg float64
							for k, d := range grown(serviceRequestsByMethod(m0, notBackground), serviceRequestsByMethod(m1, notBackground)) {
								row.CallsBy[k] += d
								calls += d
							}
							for _, d := range grown(serviceRequestsByMethod(m0, background), serviceRequestsByMethod(m1, background)) {
								bg += d
							}
							row.BackgroundCalls += bg
							if r := readsOf(m0, m1); len(r) > 0 {
								fmt.Fprintf(e.Log, "bench: concurrency: %d clients, %s: the service read: %s\n", clients, op, strings.Join(r, "; "))
							}
							row.LimiterFloorS += limiterFloor(calls+bg, res.ServiceQPS, res.ServiceBurst)
						}
					}
					from += size
				}
				rates := map[string]float64{}
				for _, via := range []string{"api", "raw"} {
					r, b := rows[rowKey{clients, op, via}], began[via]
					rates[via] = float64(r.Ops-b.ops) / (r.Seconds - b.seconds)
					r.RunRates = append(r.RunRates, rates[via])
				}
				fmt.Fprintf(e.Log, "bench: concurrency: run %d of %d, %d clients, %s: API %.1f/s, raw %.1f/s (%.2f)\n",
					run+1, runs, clients, op, rates["api"], rates["raw"], rates["api"]/rates["raw"])
			}
		}
	}
	for _, clients := range concurrencyClients {
		for _, op := range []string{"create", "delete"} {
			for _, via := range []string{"api", "raw"} {
				k := rowKey{clients, op, via}
				row := rows[k]
				fmt.Fprintf(e.Log, "bench: concurrency: %d clients, %s via %s: CPU %s\n", clients, op, via, cpuLine(row))
				row.Latency = summarize(samples[k])
				if row.Seconds > 0 {
					row.PerSecond = float64(row.Ops) / row.Seconds
				}
				switch {
				case via == "api":
					var calls float64
					for _, v := range row.CallsBy {
						calls += v
					}
					row.CallsPerOp = calls / float64(row.Ops)
				case op == "create":
					row.CallsPerOp, row.CallsBy = rawCallsPerCreate, nil
				case e.RawFinalizer:
					row.CallsPerOp, row.CallsBy = rawCallsPerDelete+1, nil
				default:
					row.CallsPerOp, row.CallsBy = rawCallsPerDelete, nil
				}
				res.Rows = append(res.Rows, *row)
			}
		}
	}
	res.ThrottleLogs = throttleLines(s.Log, logFrom)

	// The pods go by cascade, the API records once the controller has published their
	// DELETED: wait for both, then for the controllers to go quiet.
	cleanup := time.Now()
	ours := func(id string) bool { return strings.HasPrefix(id, "conc-") }
	if werr := waitUntil(ctx, 2*time.Minute, func() bool {
		a, err1 := e.countPods(ctx, md, serviceNS, ours)
		b, err2 := e.countPods(ctx, md, concurrencyRawNS, ours)
		recs, err3 := e.Admin.CoreV1().ConfigMaps(serviceNS).List(ctx, metav1.ListOptions{LabelSelector: container.RecordSelector, ResourceVersion: "0"})
		left := 0
		if err3 == nil {
			for _, r := range recs.Items {
				if ours(container.InstanceID(r.Labels)) {
					left++
				}
			}
		}
		res.PodsLeft, res.RecordsLeft = a+b, left
		return err1 == nil && err2 == nil && err3 == nil && a+b+left == 0
	}); werr != nil {
		fmt.Fprintf(e.Log, "bench: concurrency: %d pods and %d records still there after 2 minutes; going on\n", res.PodsLeft, res.RecordsLeft)
	}
	res.CleanupS = time.Since(cleanup).Seconds()
	settled, err := e.settle(ctx, time.Minute)
	if err != nil {
		return res, err
	}
	res.SettleS = settled.Seconds()
	res.PhaseS = time.Since(start).Seconds()
	return res, nil
}

// afterBatch waits until the work a batch left is done: the service has no status event
// pending and the apiserver has had two quiet seconds. Without it the next batch, often
// the other side's, would pay for the controllers' work on this one's objects: the
// rounds' order, not the sides, then set which batches were slow.
func (e *Env) afterBatch(ctx context.Context, s *Service) (time.Duration, error) {
	start := time.Now()
	if err := waitUntil(ctx, 30*time.Second, func() bool {
		m, err := s.Metrics()
		return err == nil && m["sp_status_events_pending"] == 0
	}); err != nil {
		fmt.Fprintln(e.Log, "bench: concurrency: status events still pending after 30 s; going on")
	}
	if _, err := e.quietFor(ctx, 30*time.Second, time.Second, 2, false); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// batch runs f(i) for i in [from, to) from clients clients at once and returns each
// one's latency, the wall time from the first request to the last answer, and the
// retries f reported.
func batch(ctx context.Context, clients, from, to int, f func(ctx context.Context, i int) (int, error)) ([]time.Duration, time.Duration, int, error) {
	var mu sync.Mutex
	var ds []time.Duration
	retried := 0
	start := time.Now()
	err := parallel(clients, from, to, func(i int) error {
		t := time.Now()
		r, err := f(ctx, i)
		d := time.Since(t)
		mu.Lock()
		ds = append(ds, d)
		retried += r
		mu.Unlock()
		return err
	})
	return ds, time.Since(start), retried, err
}

// send makes one API request and retries it after a 503 (the in-flight cap) for up to
// 10 tries; it returns how many times it retried.
func (s *Service) send(method, path string, body []byte, want int) (int, error) {
	for try := 0; ; try++ {
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(string(body))
		}
		req, err := http.NewRequest(method, s.URL+path, rd)
		if err != nil {
			return try, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			return try, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == want:
			return try, nil
		case resp.StatusCode == http.StatusServiceUnavailable && try < 10:
			time.Sleep(time.Second)
		default:
			return try, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
}

// deletesFinalized: no record of a deleted container is left in ns (each goes once the
// controller has published its DELETED and taken its finalizer off).
func (e *Env) deletesFinalized(ctx context.Context, ns string) bool {
	// A consistent read, not the watch cache's (ResourceVersion "0"): right after a
	// delete batch the cache may not show its last records' deletion yet, and the
	// 64-client creates of a run (15:01) counted two of their finalizing PATCHes.
	recs, err := e.Admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: container.RecordSelector})
	if err != nil {
		return false
	}
	for _, r := range recs.Items {
		if r.DeletionTimestamp != nil {
			return false
		}
	}
	return true
}

// rawCreateAsService creates container id's record, then its Service and Deployment
// at once, owned by the record, with client-go in ns: the requests a POST makes
// (internal/store/create.go), without the service's checks and its caches. The record
// carries no finalizer (no controller finalizes the raw side's records) unless
// e.RawFinalizer.
func (e *Env) rawCreateAsService(ctx context.Context, ns, id string) (rawContainer, error) {
	objs, err := rawObjects(ns, id)
	if err != nil {
		return rawContainer{}, err
	}
	r := container.NewRecord(id, container.Request{})
	if !e.RawFinalizer {
		r.Finalizers = nil
	}
	rec, err := e.Admin.CoreV1().ConfigMaps(ns).Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return rawContainer{}, fmt.Errorf("record of %s: %w", id, err)
	}
	c := rawContainer{record: rec.Name, recordUID: rec.UID}
	objs = objs.OwnedBy(rec.Name, rec.UID)
	objs.Deployment.Namespace, objs.Service.Namespace = ns, ns
	var svcErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		var svc *corev1.Service
		if svc, svcErr = e.Admin.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{}); svcErr == nil {
			c.service, c.serviceUID = svc.Name, svc.UID
		}
	})
	dep, err := e.Admin.AppsV1().Deployments(ns).Create(ctx, objs.Deployment, metav1.CreateOptions{})
	wg.Wait()
	if err != nil {
		return c, err
	}
	c.deployment, c.depUID = dep.Name, dep.UID
	return c, svcErr
}

// rawDeleteAsService deletes what rawCreateAsService made as a DELETE does
// (internal/store/delete.go): the record (background propagation), the Deployment and
// the Service at once, each with a UID precondition; with e.RawFinalizer, then the
// record's finalizer.
func (e *Env) rawDeleteAsService(ctx context.Context, ns string, c rawContainer) error {
	opts := func(uid types.UID) metav1.DeleteOptions {
		bg := metav1.DeletePropagationBackground
		return metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) }
	var depErr, svcErr error
	var wg sync.WaitGroup
	if c.deployment != "" {
		wg.Go(func() { depErr = e.Admin.AppsV1().Deployments(ns).Delete(ctx, c.deployment, opts(c.depUID)) })
	}
	if c.service != "" {
		wg.Go(func() { svcErr = e.Admin.CoreV1().Services(ns).Delete(ctx, c.service, opts(c.serviceUID)) })
	}
	var err error
	if c.record != "" {
		err = e.Admin.CoreV1().ConfigMaps(ns).Delete(ctx, c.record, opts(c.recordUID))
	}
	wg.Wait()
	for _, e := range []error{err, depErr, svcErr} {
		if !gone(e) {
			return e
		}
	}
	if e.RawFinalizer && c.record != "" {
		// The controller's PATCH once the DELETED is stored: the record goes with it.
		return e.dropRecordFinalizer(ctx, ns, c.record, c.recordUID)
	}
	return nil
}

// dropRecordFinalizer takes the service's finalizer off record name, if its UID is uid,
// as the controller does (internal/store/record.go); a record gone is success.
func (e *Env) dropRecordFinalizer(ctx context.Context, ns, name string, uid types.UID) error {
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"$deleteFromPrimitiveList/finalizers":[%q]}}`, uid, container.RecordFinalizer)
	_, err := e.Admin.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// countPods counts the pods in ns whose container id keep accepts (a metadata-only list
// from the apiserver's cache).
func (e *Env) countPods(ctx context.Context, md metadata.Interface, ns string, keep func(id string) bool) (int, error) {
	pods, err := md.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if keep(container.InstanceID(p.Labels)) {
			n++
		}
	}
	return n, nil
}

// logSize is the length of a log file now (0 when unreadable).
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// throttleLines counts the lines of the log at path after offset from where client-go
// says it waited for its own rate limiter.
func throttleLines(path string, from int64) int {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < from {
		return 0
	}
	return strings.Count(string(b[from:]), "client-side throttling")
}

// concurrencyVerdict compares one client count's API row with its raw row: the median of
// the runs' ratios (or, without runs, the ratio of the rows' rates), whether it met
// targetConcurrentRatio and, when it did not, the reason measured (empty when none was).
// The median run is free of the one run the machine slowed; each run's ratio still
// counts every batch by its time, so a side whose batches are often slow shows it.
func concurrencyVerdict(a, r ConcurrencyRow, qps, burst float64, throttleLogs, cpus int) (ratio float64, ok bool, reason string) {
	if r.PerSecond <= 0 {
		return 0, false, ""
	}
	ratio = a.PerSecond / r.PerSecond
	if rs := runRatios(a, r); len(rs) > 0 {
		ratio = median(rs)
	}
	if ratio >= targetConcurrentRatio {
		return ratio, true, ""
	}
	// The apiserver's work first (on a machine whose CPUs the control plane saturates,
	// requests per operation is what sets the rate), then the service's own limiter.
	var reasons []string
	if a.CallsPerOp > r.CallsPerOp {
		reasons = append(reasons, fmt.Sprintf("%.1f Kubernetes requests per %s against raw's %.0f (%s)", a.CallsPerOp, a.Op, r.CallsPerOp, kv(a.CallsBy)))
	}
	switch {
	case qps > 0 && a.LimiterFloorS >= 0.5*a.Seconds:
		reasons = append(reasons, fmt.Sprintf("the service's Kubernetes client limiter (%.0f requests/s, burst %.0f): at %.1f requests per %s it lets these batches take no less than %.1f s of the %.1f s they took",
			qps, burst, a.CallsPerOp, a.Op, a.LimiterFloorS, a.Seconds))
	case throttleLogs > 0:
		reasons = append(reasons, fmt.Sprintf("the service's log says %d times that client-go waited 1 s or more for its limiter", throttleLogs))
	}
	// With every CPU busy, the CPU the service itself uses is taken from the control
	// plane, which raw client-go leaves it all.
	if busy, svc := a.CPUS["machine"], a.CPUS["service"]; cpus > 0 && a.Seconds > 0 && busy >= 0.9*float64(cpus)*a.Seconds && svc > 0 {
		reasons = append(reasons, fmt.Sprintf("the machine's %d CPUs were busy (%.0f%%) and the service used %.0f%% of that, %.1f ms of CPU per %s, which raw client-go does not run",
			cpus, 100*busy/(float64(cpus)*a.Seconds), 100*svc/busy, 1000*svc/float64(a.Ops), a.Op))
	}
	// How far the rounds (or raw's own batches) are apart says how near the target a
	// ratio can be told from them.
	if rs := roundRatios(a, r); len(rs) > 1 {
		lo, hi := minMax(rs)
		reasons = append(reasons, fmt.Sprintf("the %d rounds' ratios ran from %.2f to %.2f", len(rs), lo, hi))
	} else if lo, hi := minMax(r.BatchRates); len(r.BatchRates) > 1 && hi > 0 {
		reasons = append(reasons, fmt.Sprintf("raw client-go's own batches ran at %.1f to %.1f/s (the slowest %.2f of the fastest)", lo, hi, lo/hi))
	}
	return ratio, false, strings.Join(reasons, "; ")
}

// concurrencyAPINS is where the API's containers go: a namespace of its own, empty as
// raw's, with a service of its own. In a namespace that holds other containers, the
// controllers' scans of them would slow the API's side alone.
const concurrencyAPINS = "bench-conc-api"

// concurrencyPhase starts a service in concurrencyAPINS, runs the phase with n operations
// per client count and side, and stops the service.
func (e *Env) concurrencyPhase(ctx context.Context, o Options, n int, log io.Writer) (*ConcurrencyResult, error) {
	if err := harness.EnsureNamespace(ctx, e.Admin, concurrencyAPINS); err != nil {
		return nil, err
	}
	svc, err := e.startConcurrencyService(ctx, o)
	if err != nil {
		return nil, err
	}
	defer svc.Stop()
	if o.CPUProfile != "" {
		stop := e.profileCPU(ctx, svc, o.CPUProfile, log)
		defer stop()
	}
	fmt.Fprintf(log, "bench: concurrency: %d runs of %d creates, then deletes, per side at %v clients, API and raw in rounds\n", concurrencyRunsOf(o), n, concurrencyClients)
	cr, err := e.Concurrency(ctx, svc, concurrencyAPINS, n, concurrencyRunsOf(o))
	if err != nil {
		return nil, fmt.Errorf("concurrency: %w", err)
	}
	return &cr, nil
}

// concurrencyAlone is the phase alone (sp-bench -only=concurrency).
func (e *Env) concurrencyAlone(ctx context.Context, o Options, res *Results, log io.Writer) error {
	res.ServiceEnv = o.ServiceEnv
	n := o.ConcurrencyN
	if n <= 0 {
		n = DefaultConcurrencyN
	}
	cr, err := e.concurrencyPhase(ctx, o, n, log)
	if err != nil {
		return err
	}
	res.Concurrent = cr
	return nil
}

// readsOf are the series of the service's GETs (sp_kubernetes_requests_total, any
// client) that grew from m0 to m1, with how much: no create or delete of a container
// the cache shows reads at the apiserver, so the log names each read by its client,
// resource and code.
func readsOf(m0, m1 map[string]float64) []string {
	var out []string
	for k, d := range grown(m0, m1) {
		if strings.HasPrefix(k, "sp_kubernetes_requests_total{") && labelIs(k, labelMethod, http.MethodGet) {
			out = append(out, fmt.Sprintf("%s %.0f", strings.TrimPrefix(k, "sp_kubernetes_requests_total"), d))
		}
	}
	slices.Sort(out)
	return out
}

// addCPU adds what each process used between a and b to the row's CPU seconds.
func addCPU(row *ConcurrencyRow, a, b cpuSample) {
	if row.CPUS == nil {
		row.CPUS = map[string]float64{}
	}
	for k, v := range b.procs {
		row.CPUS[k] += v - a.procs[k]
	}
	row.CPUS["machine"] += b.busy - a.busy
}

// cpuLine is the row's CPU as percent of one CPU over its batches, the largest first.
func cpuLine(row *ConcurrencyRow) string {
	if row.Seconds <= 0 {
		return "-"
	}
	names := make([]string, 0, len(row.CPUS))
	for k := range row.CPUS {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return row.CPUS[names[i]] > row.CPUS[names[j]] })
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*row.CPUS[k]/row.Seconds))
	}
	return fmt.Sprintf("over %.1f s: %s", row.Seconds, strings.Join(parts, ", "))
}

// runRatios is each run's API rate over its raw rate (nil unless both rows have the
// same runs).
func runRatios(a, r ConcurrencyRow) []float64 {
	return ratios(a.RunRates, r.RunRates)
}

// roundRatios is each round's API rate over its raw rate (nil unless both rows have the
// same rounds).
func roundRatios(a, r ConcurrencyRow) []float64 {
	return ratios(a.BatchRates, r.BatchRates)
}

// ratios is api[i] / raw[i] for each i (nil unless both have the same length and every
// raw figure is positive).
func ratios(api, raw []float64) []float64 {
	if len(api) == 0 || len(api) != len(raw) {
		return nil
	}
	out := make([]float64, len(api))
	for i := range out {
		if raw[i] <= 0 {
			return nil
		}
		out[i] = api[i] / raw[i]
	}
	return out
}

// median is the middle of vs (the mean of the two middle ones for an even count).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// minMax is the least and the greatest of vs (0, 0 when empty).
func minMax(vs []float64) (lo, hi float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	return slices.Min(vs), slices.Max(vs)
}
