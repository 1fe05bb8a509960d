package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// ThroughputResult is a burst of status changes: every pod of one node has its Ready
// condition written to the apiserver at once (what the node lifecycle controller does to
// the pods of a lost node, as harness.MarkPodLost does, here in parallel; and back),
// timed per container from its pod's write until its new status event is received on
// dcm.container.
type ThroughputResult struct {
	// Node is the node whose pods changed; Pods how many pods were written (every pod on
	// it, other namespaces' included); Containers how many of them are the service's
	// containers (the ones whose events are awaited).
	Node       string `json:"node,omitempty"`
	Pods       int    `json:"pods_written,omitempty"`
	Containers int    `json:"containers"`
	Change     string `json:"change"`    // e.g. "node lost: RUNNING → UNKNOWN"
	Transport  string `json:"transport"` // how the service published: core NATS or JetStream
	Writers    int    `json:"writers"`
	// From the first write.
	WritesS     float64 `json:"all_written_s"`
	FirstEventS float64 `json:"first_event_s"`
	AllEventsS  float64 `json:"all_events_s"`
	// WritesPerS: status changes the apiserver accepted per second (the rate the
	// changes arrive at). EventsPerS: events per second between the first and the last
	// event; PeakPerS the most in one second.
	WritesPerS float64 `json:"writes_per_s"`
	EventsPerS float64 `json:"events_per_s"`
	PeakPerS   float64 `json:"peak_events_per_s"`
	// LagS: from the last write to the last event.
	LagS float64 `json:"lag_after_last_write_s"`
	// StreamMessages: what the JetStream stream holds afterwards (JetStream only).
	StreamMessages uint64 `json:"stream_messages,omitempty"`
	// Latency: per container, from its own pod's write (UpdateStatus answered) to its
	// own event received. Lost containers are not in it.
	Latency Dist `json:"latency_ms"`
	// Lost: containers whose event had not come a minute after the last write;
	// LostAbout says, for the first few, what the service and the apiserver showed of
	// them then.
	Lost      int      `json:"lost,omitempty"`
	LostAbout []string `json:"lost_about,omitempty"`
	// WatchLatency, the control: per container, from its pod's write to a raw client-go
	// watch of the same pods (in the benchmark's process) seeing it. It is what the
	// apiserver and the machine take to deliver the change to any watcher, the service's
	// informers included. AfterWatch: from that moment to the container's event, the
	// service's own part (its informer's delivery included, which the control shares).
	WatchLatency Dist `json:"watch_latency_ms"`
	AfterWatch   Dist `json:"after_watch_ms"`
	// WatchRestarts: how often the control's watch was made again after the apiserver
	// closed it (a reader that fell behind); 0 when it never was.
	WatchRestarts int `json:"watch_restarts,omitempty"`
	// CPU: percent of one CPU by process, from the first write to the last event.
	CPU map[string]float64 `json:"cpu_percent,omitempty"`
}

// burstTarget is the burst's target: every container's event within the debounce plus
// this of its pod's write (the maximum, not a percentile), none lost.
const burstTarget = 2 * time.Second

// setReady writes a pod's Ready condition (nothing else), from the copy given; on a
// conflict it reads the pod again.
func (e *Env) setReady(ctx context.Context, p *corev1.Pod, ready bool) (*corev1.Pod, error) {
	want := corev1.ConditionFalse
	if ready {
		want = corev1.ConditionTrue
	}
	var out *corev1.Pod
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			cur, err := e.Admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p = cur
		}
		first = false
		p = p.DeepCopy()
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				p.Status.Conditions[i].Status = want
				p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		var err error
		out, err = e.Admin.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// nodePods picks the node holding the most of namespace ns's containers' pods and
// returns every pod on it (all namespaces: a lost node's pods are all marked) and the
// container ids among them that are ns's.
func (e *Env) nodePods(ctx context.Context, ns string) (string, []*corev1.Pod, map[string]bool, error) {
	byNode := map[string]int{}
	if err := e.eachPod(ctx, ns, metav1.ListOptions{LabelSelector: container.Selector}, func(p *corev1.Pod) {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			byNode[p.Spec.NodeName]++
		}
	}); err != nil {
		return "", nil, nil, err
	}
	node := busiest(byNode)
	if node == "" {
		return "", nil, nil, fmt.Errorf("no pod of %s on any node", ns)
	}
	var pods []*corev1.Pod
	ids := map[string]bool{}
	if err := e.eachPod(ctx, "", metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()}, func(p *corev1.Pod) {
		// Running and Ready: what the service reports RUNNING. (The latency phase leaves
		// its container's pod Ready in phase Unknown, so UNKNOWN already: when that pod
		// was on the burst's node, it was the one container of 2,888 with no event, in
		// both directions.)
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || !podReady(p) {
			return
		}
		pods = append(pods, p)
		if id := container.InstanceID(p.Labels); id != "" && p.Namespace == ns {
			ids[id] = true
		}
	}); err != nil {
		return "", nil, nil, err
	}
	return node, pods, ids, nil
}

// busiest is the key with the largest count (the first by name on a tie).
func busiest(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	best := ""
	for _, n := range names {
		if best == "" || counts[n] > counts[best] {
			best = n
		}
	}
	return best
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// eachPod lists the pods of ns ("": every namespace) in pages and calls f for each.
func (e *Env) eachPod(ctx context.Context, ns string, opts metav1.ListOptions, f func(*corev1.Pod)) error {
	opts.Limit = 1000
	for {
		l, err := e.Admin.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range l.Items {
			f(&l.Items[i])
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// ChangeStatus turns the pods' Ready condition to ready with writers concurrent clients
// and waits for the event with status expect of every container in ids (the pods'
// containers the service publishes). It returns the pods as written, for the next round.
func (e *Env) ChangeStatus(ctx context.Context, svc *Service, ns string, pods []*corev1.Pod, ids map[string]bool, ready bool, expect string, writers int) (ThroughputResult, []*corev1.Pod, error) {
	res := ThroughputResult{Pods: len(pods), Containers: len(ids), Writers: writers}
	events, err := e.logEvents(ids, func(st string) bool { return st == expect })
	if err != nil {
		return res, nil, err
	}
	defer events.stop()
	control, stopControl, err := e.watchReady(ctx, ns, ids, ready)
	if err != nil {
		return res, nil, err
	}
	defer stopControl()
	c0 := e.sampleCPU(map[string]*Service{"service": svc})
	out := make([]*corev1.Pod, len(pods))
	var mu sync.Mutex
	writtenAt := map[string]time.Time{} // container id → its pod's write answered
	start := time.Now()
	if err := parallel(writers, 0, len(pods), func(i int) error {
		var err error
		out[i], err = e.setReady(ctx, pods[i], ready)
		if id := container.InstanceID(pods[i].Labels); err == nil && ids[id] {
			mu.Lock()
			writtenAt[id] = time.Now()
			mu.Unlock()
		}
		return err
	}); err != nil {
		return res, nil, err
	}
	written := time.Now()
	res.WritesS = written.Sub(start).Seconds()
	res.WritesPerS = float64(len(pods)) / res.WritesS
	if err := waitUntil(ctx, time.Minute, func() bool { return events.count() >= len(ids) }); err != nil {
		if ctx.Err() != nil {
			return res, nil, err
		}
		// Missing events are the result, not a reason to lose the run.
		res.Lost = len(ids) - events.count()
		fmt.Fprintf(e.Log, "bench: status burst: %d of %d %s events never came (waited 1 min)\n", res.Lost, len(ids), expect)
		res.LostAbout = e.explainLost(ctx, svc, ns, ids, events.firsts(), 5)
		for _, l := range res.LostAbout {
			fmt.Fprintf(e.Log, "bench: status burst: no %s event: %s\n", expect, l)
		}
	}
	c1 := e.sampleCPU(map[string]*Service{"service": svc})
	res.CPU = cpuUse(c0, c1)
	stopControl()
	res.WatchRestarts = control.restarts - 1
	evs, seen := events.firsts(), control.firsts()
	res.Latency = perContainer(writtenAt, evs)
	res.WatchLatency = perContainer(writtenAt, seen)
	res.AfterWatch = perContainer(seen, evs)
	ts := events.times()
	if len(ts) == 0 {
		return res, out, nil
	}
	res.FirstEventS = ts[0].Sub(start).Seconds()
	res.AllEventsS = ts[len(ts)-1].Sub(start).Seconds()
	res.LagS = ts[len(ts)-1].Sub(written).Seconds()
	res.EventsPerS, res.PeakPerS = rates(ts)
	return res, out, nil
}

// perContainer is the distribution of each container's time from its write to its
// event. An event can come before the write's answer (the watch is that fast): 0 then.
func perContainer(written, event map[string]time.Time) Dist {
	var lat []time.Duration
	for id, w := range written {
		if ev, ok := event[id]; ok {
			lat = append(lat, max(0, ev.Sub(w)))
		}
	}
	return summarize(lat)
}

// burstOK: every container's event within the debounce plus burstTarget of its write,
// none lost.
func burstOK(t ThroughputResult) bool {
	return t.Lost == 0 && t.Latency.N > 0 && t.Latency.Max <= float64(debounceMS+burstTarget.Milliseconds())
}

// Burst loses every pod of the node holding most of ns's pods at once (RUNNING →
// UNKNOWN) with the service publishing on core NATS, then restores them (→ RUNNING)
// with a JetStream stream capturing dcm.container, as DCM's registry makes one, so
// every event waits for the stream's acknowledgement.
func (e *Env) Burst(ctx context.Context, svc *Service, ns string) ([]ThroughputResult, error) {
	node, pods, ids, err := e.nodePods(ctx, ns)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.Log, "bench: status burst: every pod of %s (%d, %d of them the service's) lost at once, then back\n", node, len(pods), len(ids))
	const writers = 32
	lost, pods, err := e.ChangeStatus(ctx, svc, ns, pods, ids, false, "UNKNOWN", writers)
	if err != nil {
		return nil, fmt.Errorf("lose: %w", err)
	}
	lost.Node = node
	lost.Change, lost.Transport = "node lost (MarkPodLost on each pod): RUNNING → UNKNOWN", "core NATS (no stream)"

	js, err := jetstream.New(e.NC)
	if err != nil {
		return nil, err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_DCM_CONTAINER", Subjects: []string{status.Subject},
		Storage: jetstream.FileStorage, MaxBytes: 128 << 20})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := js.DeleteStream(context.WithoutCancel(ctx), "BENCH_DCM_CONTAINER"); err != nil {
			fmt.Fprintln(e.Log, "bench: deleting the stream:", err)
		}
	}()
	// The service asks whether a stream captures the subject at most every 5 s.
	time.Sleep(6 * time.Second)
	restored, _, err := e.ChangeStatus(ctx, svc, ns, pods, ids, true, "RUNNING", writers)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	restored.Node = node
	restored.Change, restored.Transport = "node back (Ready again): UNKNOWN → RUNNING", "JetStream (stream acknowledges each event)"
	if info, err := stream.Info(ctx); err == nil {
		restored.StreamMessages = info.State.Msgs
	}
	return []ThroughputResult{lost, restored}, nil
}

// explainLost describes up to n containers of ids that have no event in got: what the
// service answers for each, and its pods as the apiserver has them.
func (e *Env) explainLost(ctx context.Context, svc *Service, ns string, ids map[string]bool, got map[string]time.Time, n int) []string {
	var missing []string
	for id := range ids {
		if _, ok := got[id]; !ok {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	var out []string
	for _, id := range missing[:min(n, len(missing))] {
		line := id + ": the service answers "
		if _, body, err := svc.get("/api/v1alpha1/containers/" + id); err != nil {
			line += err.Error()
		} else {
			var c struct {
				Status  string `json:"status"`
				Message string `json:"status_message"`
			}
			_ = json.Unmarshal(body, &c)
			line += fmt.Sprintf("%s (%q)", c.Status, c.Message)
		}
		pods, err := e.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: container.LabelInstanceID + "=" + id})
		if err != nil {
			out = append(out, line+"; pods: "+err.Error())
			continue
		}
		line += fmt.Sprintf("; %d pods:", len(pods.Items))
		for _, p := range pods.Items {
			line += fmt.Sprintf(" %s on %s phase %s ready %v deleting %v labels %v;", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p),
				p.DeletionTimestamp != nil, p.Labels)
		}
		out = append(out, line)
	}
	return out
}
