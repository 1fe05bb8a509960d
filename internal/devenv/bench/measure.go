package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
	resp, err := s.e.http.Post(s.URL+"/api/v1alpha1/containers?id="+id, "application/json", bytes.NewReader(specJSON("app")))
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
	resp, err := s.e.http.Get(s.URL + path)
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

// rawCreate creates the same Deployment and Service the service would, with client-go
// directly: the floor a create through the API is compared with.
func (e *Env) rawCreate(ctx context.Context, ns, id string) (time.Duration, error) {
	var c v1alpha1.Container
	if err := json.Unmarshal(specJSON("app"), &c); err != nil {
		return 0, err
	}
	objs, err := container.Build(id, &c.Spec, container.Options{Namespace: ns, ExternalServiceType: corev1.ServiceTypeLoadBalancer})
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

// CreateResult compares a POST with the raw creates it needs.
type CreateResult struct {
	Post Dist `json:"post"`
	Raw  Dist `json:"raw_client_go"`
}

// Create interleaves n POSTs with n raw creates of the same objects.
func (e *Env) Create(ctx context.Context, s *Service, rawNS string, n int) (CreateResult, error) {
	var post, raw []time.Duration
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
	}
	return CreateResult{Post: summarize(post), Raw: summarize(raw)}, nil
}

// parallel runs f(i) for i in [from, to) on workers goroutines.
func parallel(workers, from, to int, f func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
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
	r := &runningEvents{seen: map[string]bool{}}
	var err error
	r.sub, err = e.NC.Subscribe(status.Subject, func(m *nats.Msg) {
		var ev struct{ Data status.EventData }
		if json.Unmarshal(m.Data, &ev) == nil && ev.Data.Status == "RUNNING" && strings.HasPrefix(ev.Data.ID, prefix) {
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
// rawNS, the same objects with client-go; each timed until everything runs.
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
	res.APIPerSecond = float64(n) / res.APICreated
	res.RawPerSecond = float64(n) / res.RawCreated
	return res, nil
}

// Populate brings the service's namespace up to n containers (16 clients).
func (s *Service) Populate(from, to int) error {
	return parallel(16, from, to, func(i int) error { _, err := s.post(fmt.Sprintf("fill-%05d", i)); return err })
}

// ReadResult is the read path at one size.
type ReadResult struct {
	Containers       int     `json:"containers"`
	Get              Dist    `json:"get"`
	ListStart        Dist    `json:"list_page_start"`
	ListMiddle       Dist    `json:"list_page_middle"`
	ListEnd          Dist    `json:"list_page_end"`
	RPS              float64 `json:"get_rps_8_clients"`
	APIServerReads   float64 `json:"apiserver_reads_during_phase"`
	ServiceKubeCalls float64 `json:"service_kubernetes_requests_during_phase"`
	PhaseSeconds     float64 `json:"phase_s"`
	RSSBytes         int64   `json:"rss_bytes_after_reads"`
	HeapInuseBytes   float64 `json:"go_heap_inuse_bytes_after_reads"`
	IdleRSSBytes     int64   `json:"rss_bytes_idle"`
	IdleHeapBytes    float64 `json:"go_heap_inuse_bytes_idle"`
	ListedPerWalk    int     `json:"listed_per_walk"`
}

// Reads measures GET, LIST pages and throughput with n containers, and counts the
// apiserver requests the phase caused.
func (e *Env) Reads(ctx context.Context, s *Service, ids []string) (ReadResult, error) {
	res := ReadResult{Containers: len(ids)}
	time.Sleep(5 * time.Second) // let the creates' aftermath (events, pods) settle
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

	var gets []time.Duration
	for range 2000 {
		d, _, err := s.get("/api/v1alpha1/containers/" + ids[rand.IntN(len(ids))])
		if err != nil {
			return res, err
		}
		gets = append(gets, d)
	}
	res.Get = summarize(gets)

	var startP, midP, endP []time.Duration
	for range 3 {
		var pages []time.Duration
		token, listed := "", 0
		for {
			path := "/api/v1alpha1/containers?max_page_size=50"
			if token != "" {
				path += "&page_token=" + url.QueryEscape(token)
			}
			d, b, err := s.get(path)
			if err != nil {
				return res, err
			}
			pages = append(pages, d)
			var page struct {
				Containers    []json.RawMessage `json:"containers"`
				NextPageToken string            `json:"next_page_token"`
			}
			if err := json.Unmarshal(b, &page); err != nil {
				return res, err
			}
			listed += len(page.Containers)
			if token = page.NextPageToken; token == "" {
				break
			}
		}
		res.ListedPerWalk = listed
		k := max(1, len(pages)/10)
		startP = append(startP, pages[:k]...)
		midP = append(midP, pages[len(pages)/2-k/2:len(pages)/2-k/2+k]...)
		endP = append(endP, pages[len(pages)-k:]...)
	}
	res.ListStart, res.ListMiddle, res.ListEnd = summarize(startP), summarize(midP), summarize(endP)

	var done atomic.Int64
	deadline := time.Now().Add(5 * time.Second)
	_ = parallel(8, 0, 8, func(int) error {
		for time.Now().Before(deadline) {
			if _, _, err := s.get("/api/v1alpha1/containers/" + ids[rand.IntN(len(ids))]); err != nil {
				return err
			}
			done.Add(1)
		}
		return nil
	})
	res.RPS = float64(done.Load()) / 5

	res.PhaseSeconds = time.Since(phase).Seconds()
	after, err := e.APIServerMetrics(ctx)
	if err != nil {
		return res, err
	}
	sm1, err := s.Metrics()
	if err != nil {
		return res, err
	}
	res.APIServerReads = readRequests(after) - readRequests(before)
	res.ServiceKubeCalls = serviceKubeRequests(sm1) - serviceKubeRequests(sm0)
	res.RSSBytes, _ = s.RSS()
	res.HeapInuseBytes = sm1["go_memstats_heap_inuse_bytes"]
	return res, nil
}

// StatusLatency writes pod status changes to the apiserver and times until the
// CloudEvent carrying each arrives on NATS.
func (e *Env) StatusLatency(ctx context.Context, s *Service, ns string, samples int) (Dist, error) {
	if _, err := s.post("latency"); err != nil {
		return Dist{}, err
	}
	arrived := make(chan string, 16)
	sub, err := e.NC.Subscribe(status.Subject, func(m *nats.Msg) {
		var ev struct{ Data status.EventData }
		if json.Unmarshal(m.Data, &ev) == nil && ev.Data.ID == "latency" {
			arrived <- ev.Data.Message
		}
	})
	if err != nil {
		return Dist{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	sel := metav1.ListOptions{LabelSelector: container.InstanceSelector("latency")}
	var pod *corev1.Pod
	if err := waitUntil(ctx, time.Minute, func() bool {
		pods, err := e.Admin.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false
		}
		pod = &pods.Items[0]
		return true
	}); err != nil {
		return Dist{}, err
	}
	time.Sleep(time.Second)
	var lat []time.Duration
	for i := range samples {
		reason := fmt.Sprintf("Probe%d", i)
		pod.Status.Phase, pod.Status.Reason = corev1.PodUnknown, reason
		start := time.Now()
		updated, err := e.Admin.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err != nil {
			return Dist{}, err
		}
		pod = updated
		timeout := time.After(10 * time.Second)
	wait:
		for {
			select {
			case msg := <-arrived:
				if strings.HasPrefix(msg, reason+":") || msg == reason {
					lat = append(lat, time.Since(start))
					break wait
				}
			case <-timeout:
				return Dist{}, fmt.Errorf("no event for %s", reason)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return summarize(lat), nil
}

func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
