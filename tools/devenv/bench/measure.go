package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// specJSON is the container every benchmark creates: small requests, so thousands fit
// on the fake node (1000 cores), and one internal port, so each has a Service too.
func specJSON(name string) []byte {
	return []byte(`{"spec":{"service_type":"container","metadata":{"name":"` + name + `"},` +
		`"image":{"reference":"quay.io/example/app:v1"},` +
		`"resources":{"cpu":{"min":"10m","max":"100m"},"memory":{"min":"16MB","max":"32MB"}},` +
		`"network":{"ports":[{"container_port":8080,"visibility":"internal"}]}}}`)
}

func (s *Service) post(id string) (time.Duration, error) {
	start := time.Now()
	resp, err := s.Client().Post(s.URL+"/api/v1alpha1/containers?id="+id, "application/json", bytes.NewReader(specJSON("app")))
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != http.StatusCreated {
		return d, fmt.Errorf("POST %s: %d %s", id, resp.StatusCode, b)
	}
	return d, nil
}

func (s *Service) get(path string) (time.Duration, []byte, error) {
	start := time.Now()
	resp, err := s.Client().Get(s.URL + path)
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return d, b, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return d, b, err
}

// rawObjects are the Deployment and Service the service would build for specJSON.
func rawObjects(ns, id string) (container.Objects, error) {
	return appObjects(ns, id, false)
}

// portlessObjects is rawObjects for specJSON's container without its port: a Deployment
// and no Service.
func portlessObjects(ns, id string) (container.Objects, error) {
	return appObjects(ns, id, true)
}

// appObjects maps specJSON's container (without its network, portless) to its objects
// with the options the bench's service runs with.
func appObjects(ns, id string, portless bool) (container.Objects, error) {
	var c v1alpha1.Container
	if err := json.Unmarshal(specJSON("app"), &c); err != nil {
		return container.Objects{}, err
	}
	if portless {
		c.Spec.Network = nil
	}
	return container.Build(id, &c.Spec, container.Options{Namespace: ns, ExternalServiceType: corev1.ServiceTypeLoadBalancer,
		PodSecurity: container.Baseline})
}

// rawCreate creates the same Deployment and Service the service would, with client-go
// directly, one after the other: the floor a create through the API is compared with.
func (e *Env) rawCreate(ctx context.Context, ns, id string) (time.Duration, error) {
	objs, err := rawObjects(ns, id)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := e.Admin.AppsV1().Deployments(ns).Create(ctx, objs.Deployment, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	if _, err := e.Admin.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// rawCreateParallel creates the same two objects at once, as the service does after the
// record: the floor of the service's own way of writing them.
func (e *Env) rawCreateParallel(ctx context.Context, ns, id string) (time.Duration, error) {
	objs, err := rawObjects(ns, id)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := e.createBoth(ctx, ns, objs); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (e *Env) createBoth(ctx context.Context, ns string, objs container.Objects) error {
	var wg sync.WaitGroup
	var svcErr error
	wg.Go(func() {
		_, svcErr = e.Admin.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{})
	})
	_, depErr := e.Admin.AppsV1().Deployments(ns).Create(ctx, objs.Deployment, metav1.CreateOptions{})
	wg.Wait()
	if depErr != nil {
		return depErr
	}
	return svcErr
}

// CreateResult compares a POST with the raw creates it needs.
type CreateResult struct {
	Post Dist `json:"post"`
	Raw  Dist `json:"raw_client_go"`
	// RawParallel: the Deployment and the Service created at once.
	RawParallel Dist `json:"raw_client_go_parallel"`
	// RawOwned: what a POST writes, written the way it writes them: the record, then
	// the Deployment and the Service at once, owned by it (rawCreateAsService). The
	// POST's p50 over this one's is what the service itself adds.
	RawOwned Dist `json:"raw_client_go_owned,omitzero"`
}

// Create interleaves n POSTs with n raw creates of the same objects one after the other,
// n with both at once and n as the POST makes them (with its record).
func (e *Env) Create(ctx context.Context, s *Service, rawNS string, n int) (CreateResult, error) {
	var post, raw, par, owned []time.Duration
	for i := range n {
		d, err := s.post(fmt.Sprintf("create-%04d", i))
		if err != nil {
			return CreateResult{}, err
		}
		post = append(post, d)
		if d, err = e.rawCreate(ctx, rawNS, fmt.Sprintf("create-%04d", i)); err != nil {
			return CreateResult{}, err
		}
		raw = append(raw, d)
		if d, err = e.rawCreateParallel(ctx, rawNS, fmt.Sprintf("pcreate-%04d", i)); err != nil {
			return CreateResult{}, err
		}
		par = append(par, d)
		began := time.Now()
		if _, err := e.rawCreateAsService(ctx, rawNS, fmt.Sprintf("ocreate-%04d", i)); err != nil {
			return CreateResult{}, err
		}
		owned = append(owned, time.Since(began))
	}
	return CreateResult{Post: summarize(post), Raw: summarize(raw), RawParallel: summarize(par), RawOwned: summarize(owned)}, nil
}

// BulkResult is the time to create containers and see them all RUNNING.
type BulkResult struct {
	Count        int     `json:"count"`
	Clients      int     `json:"clients"`
	APICreated   float64 `json:"api_all_created_s"`
	APIRunning   float64 `json:"api_all_running_event_s"`
	RawCreated   float64 `json:"raw_all_created_s"`
	RawRunning   float64 `json:"raw_all_pods_running_s"`
	APIPerSecond float64 `json:"api_creates_per_s"`
	RawPerSecond float64 `json:"raw_creates_per_s"`
}

// runningEvents counts containers whose RUNNING event arrived on NATS.
type runningEvents struct {
	mu   sync.Mutex
	seen map[string]bool
	sub  *nats.Subscription
}

func (e *Env) watchRunning(prefix string) (*runningEvents, error) {
	return e.watchRunningOf(func(id string) bool { return strings.HasPrefix(id, prefix) })
}

// watchRunningOf counts the ids that want accepts.
func (e *Env) watchRunningOf(want func(id string) bool) (*runningEvents, error) {
	r := &runningEvents{seen: map[string]bool{}}
	var err error
	r.sub, err = e.NC.Subscribe(status.Subject, func(m *nats.Msg) {
		var ev struct{ Data status.EventData }
		if json.Unmarshal(m.Data, &ev) == nil && ev.Data.Status == "RUNNING" && want(ev.Data.ID) {
			r.mu.Lock()
			r.seen[ev.Data.ID] = true
			r.mu.Unlock()
		}
	})
	return r, err
}

func (r *runningEvents) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// Bulk creates n containers with `clients` concurrent clients through the API and, in
// rawNS (unless empty), the same objects with client-go; each timed until everything runs.
func (e *Env) Bulk(ctx context.Context, s *Service, rawNS string, n, clients int) (BulkResult, error) {
	res := BulkResult{Count: n, Clients: clients}
	events, err := e.watchRunning("bulk-")
	if err != nil {
		return res, err
	}
	defer func() { _ = events.sub.Unsubscribe() }()
	start := time.Now()
	if err := parallel(clients, 0, n, func(i int) error { _, err := s.post(fmt.Sprintf("bulk-%05d", i)); return err }); err != nil {
		return res, err
	}
	res.APICreated = time.Since(start).Seconds()
	if err := waitUntil(ctx, 10*time.Minute, func() bool { return events.count() >= n }); err != nil {
		return res, fmt.Errorf("%d of %d RUNNING events: %w", events.count(), n, err)
	}
	res.APIRunning = time.Since(start).Seconds()
	res.APIPerSecond = float64(n) / res.APICreated
	if rawNS == "" {
		return res, nil
	}

	// The same through client-go, watching pods with an informer.
	factory := informers.NewSharedInformerFactoryWithOptions(e.Admin, 0, informers.WithNamespace(rawNS))
	pods := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	running := map[string]bool{}
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		if p := obj.(*corev1.Pod); p.Status.Phase == corev1.PodRunning {
			mu.Lock()
			running[container.InstanceID(p.Labels)] = true
			mu.Unlock()
		}
	}})
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	start = time.Now()
	if err := parallel(clients, 0, n, func(i int) error { _, err := e.rawCreate(ctx, rawNS, fmt.Sprintf("bulk-%05d", i)); return err }); err != nil {
		return res, err
	}
	res.RawCreated = time.Since(start).Seconds()
	if err := waitUntil(ctx, 10*time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(running) >= n }); err != nil {
		return res, err
	}
	res.RawRunning = time.Since(start).Seconds()
	res.RawPerSecond = float64(n) / res.RawCreated
	return res, nil
}

// serviceUserAgent is the first word of the service's Kubernetes user agent (client-go
// names a client after its binary).
const serviceUserAgent = "k8s-container-sp"

// ReadResult is the read path at one size.
type ReadResult struct {
	Containers int `json:"containers"`
	ReadLoad
	APIServerReads float64 `json:"apiserver_reads_during_phase"`
	// APIServerReadsBy breaks APIServerReads down ("GET deployments"); every client.
	APIServerReadsBy map[string]float64 `json:"apiserver_reads_by,omitempty"`
	// AuditedReadsBy: the same reads from the apiserver's audit log, by client (the first
	// word of its user agent: "k8s-container-sp LIST services").
	AuditedReadsBy map[string]float64 `json:"audited_reads_by_client,omitempty"`
	// ServiceReads: those of AuditedReadsBy the service made (its binary's user agent).
	ServiceReads     float64 `json:"service_reads_audited"`
	ServiceKubeCalls float64 `json:"service_kubernetes_requests_during_phase"`
	// ServiceKubeBy: the service's own requests by method (its lock renewals are PUTs,
	// its apiserver health probe a GET every 5 s).
	ServiceKubeBy map[string]float64 `json:"service_kubernetes_requests_by_method,omitempty"`
	// CPU during the phase, percent of one CPU by process (see FillResult).
	CPU            map[string]float64 `json:"cpu_percent"`
	PhaseSeconds   float64            `json:"phase_s"`
	RSSBytes       int64              `json:"rss_bytes_after_reads"`
	HeapInuseBytes float64            `json:"go_heap_inuse_bytes_after_reads"`
	IdleRSSBytes   int64              `json:"rss_bytes_idle"`
	IdleHeapBytes  float64            `json:"go_heap_inuse_bytes_idle"`
	// SettleSeconds: how long the control plane took to go quiet before the phase.
	SettleSeconds float64 `json:"settle_s"`
}

// Reads measures GET, LIST pages and throughput with n containers, and counts the
// apiserver requests the phase caused.
func (e *Env) Reads(ctx context.Context, s *Service, ids []string) (ReadResult, error) {
	res := ReadResult{Containers: len(ids)}
	// RUNNING everywhere is not the end of the creates: the controllers still write the
	// Deployments' and ReplicaSets' statuses (after a fast fill of thousands, for a minute
	// or more), and the service handles every one. Idle means after that.
	settled, err := e.settle(ctx, 3*time.Minute)
	if err != nil {
		return res, err
	}
	cpu, err := e.cpuQuiet(ctx, 2*time.Minute)
	if err != nil {
		return res, err
	}
	res.SettleSeconds = (settled + cpu).Seconds()
	before, err := e.APIServerMetrics(ctx)
	if err != nil {
		return res, err
	}
	sm0, err := s.Metrics()
	if err != nil {
		return res, err
	}
	res.IdleRSSBytes, _ = s.RSS()
	res.IdleHeapBytes = sm0["go_memstats_heap_inuse_bytes"]
	phase := time.Now()
	c0 := e.sampleCPU(map[string]*Service{"service": s})

	load, err := MeasureReads(s.get, func() string { return ids[rand.IntN(len(ids))] }, 3)
	if err != nil {
		return res, err
	}
	// An error of one of the 8 clients only stops that client (load.ClientsErr).
	res.ReadLoad = load

	res.PhaseSeconds = time.Since(phase).Seconds()
	after, err := e.APIServerMetrics(ctx)
	if err != nil {
		return res, err
	}
	sm1, err := s.Metrics()
	if err != nil {
		return res, err
	}
	res.CPU = cpuUse(c0, e.sampleCPU(map[string]*Service{"service": s}))
	r0, by0 := readRequests(before)
	r1, by1 := readRequests(after)
	res.APIServerReads = r1 - r0
	res.APIServerReadsBy = grown(by0, by1)
	if res.AuditedReadsBy, err = auditedReads(e.Cluster.AuditLogPath(), phase, time.Now()); err != nil {
		return res, err
	}
	for k, v := range res.AuditedReadsBy {
		if strings.HasPrefix(k, serviceUserAgent+" ") {
			res.ServiceReads += v
		}
	}
	res.ServiceKubeCalls = serviceKubeRequests(sm1) - serviceKubeRequests(sm0)
	res.ServiceKubeBy = grown(serviceRequestsByMethod(sm0, allRequests), serviceRequestsByMethod(sm1, allRequests))
	res.RSSBytes, _ = s.RSS()
	res.HeapInuseBytes = sm1["go_memstats_heap_inuse_bytes"]
	return res, nil
}
