package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/metrics"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// firstSeen records, per container id, when something was first seen of it (an event,
// a pod's change). Safe for concurrent use; the zero value is ready.
type firstSeen struct {
	mu    sync.Mutex
	first map[string]time.Time
}

// note records t for id unless id was seen before.
func (f *firstSeen) note(id string, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = map[string]time.Time{}
	}
	if _, ok := f.first[id]; !ok {
		f.first[id] = t
	}
}

func (f *firstSeen) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.first)
}

// firsts is a copy of when each id was first seen.
func (f *firstSeen) firsts() map[string]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]time.Time, len(f.first))
	for id, t := range f.first {
		out[id] = t
	}
	return out
}

// times are the first-seen times, sorted.
func (f *firstSeen) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Time, 0, len(f.first))
	for _, t := range f.first {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// eventLog records, per container id, when its first status event (with a status that
// want accepts) arrived on dcm.container.
type eventLog struct {
	firstSeen
	sub *nats.Subscription
}

func (e *Env) logEvents(ids map[string]bool, want func(status string) bool) (*eventLog, error) {
	l := &eventLog{}
	var err error
	l.sub, err = e.NC.Subscribe(status.Subject, func(m *nats.Msg) {
		now := time.Now()
		var ev struct{ Data status.EventData }
		if json.Unmarshal(m.Data, &ev) != nil || !ids[ev.Data.ID] || !want(ev.Data.Status) {
			return
		}
		l.note(ev.Data.ID, now)
	})
	return l, err
}

func (l *eventLog) stop() { _ = l.sub.Unsubscribe() }

// rates are the mean rate between the first and the last arrival and the most arrivals
// in any one-second window.
func rates(ts []time.Time) (mean, peak float64) {
	if len(ts) < 2 {
		return 0, 0
	}
	if d := ts[len(ts)-1].Sub(ts[0]).Seconds(); d > 0 {
		mean = float64(len(ts)-1) / d
	}
	j := 0
	for i := range ts {
		for ts[i].Sub(ts[j]) > time.Second {
			j++
		}
		peak = max(peak, float64(i-j+1))
	}
	return mean, peak
}

// StartupResult is a restart of the service with every container present.
type StartupResult struct {
	Containers int    `json:"containers"`
	Binary     string `json:"binary"`
	// From the process's start.
	ReadyS       float64 `json:"ready_s"` // GET /readyz answers 200
	LeaderS      float64 `json:"leader_s"`
	FirstEventS  float64 `json:"first_event_s"`
	RepublishedS float64 `json:"all_republished_s"` // every container's status event received
	// RepublishPerS is the republish's events per second (first to last event), PeakPerS
	// the most in one second.
	RepublishPerS float64 `json:"republish_events_per_s"`
	PeakPerS      float64 `json:"republish_peak_events_per_s"`
	// RawSyncS is the limit: a plain client-go informer set (Deployments, Pods, Services,
	// ConfigMaps with the service's selector: its records) started in the benchmark process, until synced.
	RawSyncS float64 `json:"raw_informer_sync_s"`
	// APIServer counts, from the apiserver's own metrics, between the process start and
	// the end of the republish: "LIST <resource>" (apiserver_request_total) and
	// "WATCH-LIST <resource>" (initial lists streamed over a watch,
	// apiserver_watch_list_duration_seconds_count), for the four resources cached.
	APIServer map[string]float64 `json:"apiserver_requests"`
	// ServiceRequests is the service's own sp_kubernetes_requests_total by method, from
	// its start to the end of the republish.
	ServiceRequests map[string]float64 `json:"service_kubernetes_requests"`
	// ServiceLists are the service's own LISTs and WATCHes of the four resources it
	// caches ("WATCH pods"), from the same count: each informer's first WATCH streams
	// its initial list, so one of each per resource is the least a start can make.
	ServiceLists   map[string]float64 `json:"service_initial_lists"`
	RSSBytes       int64              `json:"rss_bytes_after_republish"`
	HeapInuseBytes float64            `json:"go_heap_inuse_bytes_after_republish"`
	// From the service's own log, seconds from the process start: its informer caches
	// synced, it became the leader, its controller started the republish.
	LogCachesSyncedS float64 `json:"log_caches_synced_s"`
	LogLeaderS       float64 `json:"log_became_leader_s"`
	LogRepublishS    float64 `json:"log_republish_started_s"`
	// A second replica started in the same namespace meanwhile (not the leader).
	SecondReadyS    float64 `json:"second_replica_ready_s"`
	SecondRSSBytes  int64   `json:"second_replica_rss_bytes"`
	SecondHeapBytes float64 `json:"second_replica_go_heap_inuse_bytes"`
}

// RawSync is the limit of a start-up: how long a plain client-go informer set takes to
// load the same objects the service caches, in this process.
func (e *Env) RawSync(ctx context.Context, ns string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f := informers.NewSharedInformerFactoryWithOptions(e.Admin, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = container.Selector }))
	infs := []cache.SharedIndexInformer{f.Apps().V1().Deployments().Informer(), f.Core().V1().Pods().Informer(),
		f.Core().V1().Services().Informer(), f.Core().V1().ConfigMaps().Informer()}
	start := time.Now()
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }()
	for _, inf := range infs {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return 0, fmt.Errorf("raw informers not synced: %w", ctx.Err())
		}
	}
	return time.Since(start), nil
}

// allRequests, background and notBackground pick what serviceRequestsByMethod counts.
// The background requests come at their own pace whatever the load: the leader
// election's (a client of its own, its ConfigMap lock renewed about every
// election.RetryPeriod), the health probe's (the apiserver's /readyz, no resource,
// every 5 s), the permission check's (a SelfSubjectAccessReview per permission the
// service needs, every 5 minutes) and the informers' watches (method WATCH: each started
// again every 5 to 10 minutes, client-go's watch timeout).
func allRequests(string, string, string) bool { return true }
func background(client, resource, method string) bool {
	return client == metrics.ClientElection || resource == "none" || resource == "selfsubjectaccessreviews" || method == "WATCH"
}
func notBackground(client, resource, method string) bool {
	return !background(client, resource, method)
}

var (
	labelResource = regexp.MustCompile(`resource="([^"]*)"`)
	labelVerb     = regexp.MustCompile(`verb="([^"]*)"`)
	labelMethod   = regexp.MustCompile(`method="([^"]*)"`)
	labelClient   = regexp.MustCompile(`client="([^"]*)"`)
)

// cachedResources are the resources the service keeps informers of.
var cachedResources = map[string]bool{"deployments": true, "pods": true, "services": true, "configmaps": true}

// startupRequests picks from the apiserver's metrics the LISTs and the streamed initial
// lists of the four resources the service caches.
func startupRequests(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		r := labelResource.FindStringSubmatch(k)
		if r == nil || !cachedResources[r[1]] {
			continue
		}
		switch {
		case strings.HasPrefix(k, "apiserver_request_total{"):
			if vb := labelVerb.FindStringSubmatch(k); vb != nil && vb[1] == "LIST" {
				out["LIST "+r[1]] += v
			}
		case strings.HasPrefix(k, "apiserver_watch_list_duration_seconds_count{"):
			out["WATCH-LIST "+r[1]] += v
		}
	}
	return out
}

// apiserverRequests is the apiserver's count of the requests it served, every client's,
// by "VERB resource" (WATCH and the health endpoints left out).
func apiserverRequests(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "apiserver_request_total{") {
			continue
		}
		vb, r := labelVerb.FindStringSubmatch(k), labelResource.FindStringSubmatch(k)
		if vb == nil || r == nil || r[1] == "" || vb[1] == "WATCH" {
			continue
		}
		out[vb[1]+" "+r[1]] += v
	}
	return out
}

// serviceLists picks from the service's own metrics its LISTs and WATCHes of the four
// resources it caches, by method and resource.
func serviceLists(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "sp_kubernetes_requests_total{") {
			continue
		}
		c, r, mt := labelClient.FindStringSubmatch(k), labelResource.FindStringSubmatch(k), labelMethod.FindStringSubmatch(k)
		if c == nil || r == nil || mt == nil || c[1] != metrics.ClientService || !cachedResources[r[1]] {
			continue
		}
		if mt[1] == "LIST" || mt[1] == "WATCH" {
			out[mt[1]+" "+r[1]] += v
		}
	}
	return out
}

// grown is how much each count grew from before to after (the counts that did not
// change left out).
func grown(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// serviceRequestsByMethod is the service's own count of its Kubernetes requests
// (sp_kubernetes_requests_total) by method, of those keep takes by their client,
// resource and method labels (allRequests: every request).
func serviceRequestsByMethod(m map[string]float64, keep func(client, resource, method string) bool) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "sp_kubernetes_requests_total{") {
			continue
		}
		c, r, mt := labelClient.FindStringSubmatch(k), labelResource.FindStringSubmatch(k), labelMethod.FindStringSubmatch(k)
		if mt == nil || c != nil && r != nil && !keep(c[1], r[1], mt[1]) {
			continue
		}
		out[mt[1]] += v
	}
	return out
}

// Restart stops old and starts the service again (binary bin) in ns, where the
// containers ids live, and times its start-up: to ready, to leading, to every
// container's status republished (received on NATS). Then a second replica is started
// beside it and timed to ready. It returns the new process and that second replica.
func (e *Env) Restart(ctx context.Context, old *Service, ns, bin string, ids []string, extraEnv []string) (*Service, *Service, StartupResult, error) {
	res := StartupResult{Containers: len(ids), Binary: "service"}
	if bin == e.ProfBin {
		res.Binary = "service + net/http/pprof (profiling build)"
	}
	raw, err := e.RawSync(ctx, ns)
	if err != nil {
		return nil, nil, res, err
	}
	res.RawSyncS = raw.Seconds()
	old.Stop()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	events, err := e.logEvents(want, func(string) bool { return true })
	if err != nil {
		return nil, nil, res, err
	}
	defer events.stop()
	before, err := e.APIServerMetrics(ctx)
	if err != nil {
		return nil, nil, res, err
	}
	s, err := e.Launch(ns, ns+"-restarted", bin, unlimited(extraEnv)...)
	if err != nil {
		return nil, nil, res, err
	}
	fail := func(err error) (*Service, *Service, StartupResult, error) {
		s.Stop()
		return nil, nil, res, err
	}
	if err := s.WaitUntil(ctx, 2*time.Minute, "ready", s.Ready); err != nil {
		return fail(err)
	}
	res.ReadyS = time.Since(s.Started).Seconds()
	if err := s.WaitUntil(ctx, time.Minute, "leading", s.Leading); err != nil {
		return fail(err)
	}
	res.LeaderS = time.Since(s.Started).Seconds()
	if err := waitUntil(ctx, 5*time.Minute, func() bool { return events.count() >= len(ids) }); err != nil {
		return fail(fmt.Errorf("republish: %d of %d containers' events: %w", events.count(), len(ids), err))
	}
	ts := events.times()
	res.FirstEventS = ts[0].Sub(s.Started).Seconds()
	res.RepublishedS = ts[len(ts)-1].Sub(s.Started).Seconds()
	res.RepublishPerS, res.PeakPerS = rates(ts)
	after, err := e.APIServerMetrics(ctx)
	if err != nil {
		return fail(err)
	}
	res.APIServer = grown(startupRequests(before), startupRequests(after))
	sm, err := s.Metrics()
	if err != nil {
		return fail(err)
	}
	res.ServiceRequests = serviceRequestsByMethod(sm, allRequests)
	res.ServiceLists = serviceLists(sm)
	res.RSSBytes, _ = s.RSS()
	res.HeapInuseBytes = sm["go_memstats_heap_inuse_bytes"]
	at := logTimes(s.Log, "informer caches synced", "status: became the leader", "status: reporting; publishing every container's current status")
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(s.Started).Seconds()
	}
	res.LogCachesSyncedS, res.LogLeaderS, res.LogRepublishS = since(at[0]), since(at[1]), since(at[2])

	b, err := e.Launch(ns, ns+"-second", e.Bin, unlimited(extraEnv)...)
	if err != nil {
		return fail(err)
	}
	if err := b.WaitUntil(ctx, 2*time.Minute, "ready", b.Ready); err != nil {
		b.Stop()
		return fail(err)
	}
	res.SecondReadyS = time.Since(b.Started).Seconds()
	time.Sleep(2 * time.Second)
	res.SecondRSSBytes, _ = b.RSS()
	if bm, err := b.Metrics(); err == nil {
		res.SecondHeapBytes = bm["go_memstats_heap_inuse_bytes"]
	}
	return s, b, res, nil
}

// logTimes finds in a service log (JSON lines) the time of the first line with each msg.
func logTimes(path string, msgs ...string) []time.Time {
	out := make([]time.Time, len(msgs))
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		for i, m := range msgs {
			if line.Msg == m && out[i].IsZero() {
				out[i] = line.Time
			}
		}
	}
	return out
}
