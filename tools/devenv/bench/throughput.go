package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// ThroughputResult is many containers changing status at once: their pods' Ready
// condition written to the apiserver (what the node lifecycle controller does to the
// pods of a lost node, as harness.MarkPodLost does, here in parallel; and back), timed
// until every container's new status event is received on dcm.container.
type ThroughputResult struct {
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
	// Lost: containers whose event had not come a minute after the last write.
	Lost int `json:"lost,omitempty"`
}

// podsOf finds the pods of the containers ids (one List of the namespace, in pages).
func (e *Env) podsOf(ctx context.Context, ns string, ids []string) ([]*corev1.Pod, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []*corev1.Pod
	opts := metav1.ListOptions{LabelSelector: container.Selector, Limit: 1000}
	for {
		l, err := e.Admin.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			p := &l.Items[i]
			if id := container.InstanceID(p.Labels); want[id] && p.DeletionTimestamp == nil {
				out = append(out, p)
				delete(want, id)
			}
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("%d of %d containers have no pod", len(want), len(ids))
	}
	return out, nil
}

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

// ChangeStatus turns the pods' Ready condition to ready with writers concurrent clients
// and waits for every container's event with status expect. It returns the pods as
// written, for the next round.
func (e *Env) ChangeStatus(ctx context.Context, pods []*corev1.Pod, ready bool, expect string, writers int) (ThroughputResult, []*corev1.Pod, error) {
	res := ThroughputResult{Containers: len(pods), Writers: writers}
	ids := map[string]bool{}
	for _, p := range pods {
		ids[container.InstanceID(p.Labels)] = true
	}
	events, err := e.logEvents(ids, func(st string) bool { return st == expect })
	if err != nil {
		return res, nil, err
	}
	defer events.stop()
	out := make([]*corev1.Pod, len(pods))
	start := time.Now()
	if err := parallel(writers, 0, len(pods), func(i int) error {
		var err error
		out[i], err = e.setReady(ctx, pods[i], ready)
		return err
	}); err != nil {
		return res, nil, err
	}
	written := time.Now()
	res.WritesS = written.Sub(start).Seconds()
	res.WritesPerS = float64(len(pods)) / res.WritesS
	if err := waitUntil(ctx, time.Minute, func() bool { return events.count() >= len(pods) }); err != nil {
		if ctx.Err() != nil {
			return res, nil, err
		}
		// Missing events are the result, not a reason to lose the run.
		res.Lost = len(pods) - events.count()
		fmt.Fprintf(e.Log, "bench: status throughput: %d of %d %s events never came (waited 1 min)\n", res.Lost, len(pods), expect)
	}
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

// Throughput loses n containers' pods (RUNNING → UNKNOWN) with the service publishing
// on core NATS, then restores them (→ RUNNING) with a JetStream stream capturing
// dcm.container, as DCM's registry makes one, so every event waits for the stream's
// acknowledgement.
func (e *Env) Throughput(ctx context.Context, ns string, ids []string) ([]ThroughputResult, error) {
	pods, err := e.podsOf(ctx, ns, ids)
	if err != nil {
		return nil, err
	}
	const writers = 32
	lost, pods, err := e.ChangeStatus(ctx, pods, false, "UNKNOWN", writers)
	if err != nil {
		return nil, fmt.Errorf("lose: %w", err)
	}
	lost.Change, lost.Transport = "pods lost (MarkPodLost): RUNNING → UNKNOWN", "core NATS (no stream)"

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
	restored, _, err := e.ChangeStatus(ctx, pods, true, "RUNNING", writers)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	restored.Change, restored.Transport = "pods back (Ready again): UNKNOWN → RUNNING", "JetStream (stream acknowledges each event)"
	if info, err := stream.Info(ctx); err == nil {
		restored.StreamMessages = info.State.Msgs
	}
	return []ThroughputResult{lost, restored}, nil
}
