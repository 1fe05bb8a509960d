package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// StatusLatency writes pod status changes to the apiserver and times until the
// CloudEvent carrying each arrives on NATS.
func (e *Env) StatusLatency(ctx context.Context, s *Service, ns string, samples int) (Dist, error) {
	if _, err := s.post("latency"); err != nil {
		return Dist{}, err
	}
	arrived := make(chan status.EventData, 16)
	sub, err := e.NC.Subscribe(status.Subject, func(m *nats.Msg) {
		var ev struct{ Data status.EventData }
		if json.Unmarshal(m.Data, &ev) == nil && ev.Data.ID == "latency" {
			arrived <- ev.Data
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
	lost := 0
	for i := range samples {
		if lost >= 3 && len(lat) == lost {
			// Nothing ever arrives: 10 s per sample would only add to the wait.
			fmt.Fprintf(e.Log, "bench: status latency: the first %d events never came; stopping\n", lost)
			break
		}
		reason := fmt.Sprintf("Probe%d", i)
		pod.Status.Phase, pod.Status.Reason = corev1.PodUnknown, reason
		start := time.Now()
		updated, err := e.Admin.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err != nil {
			return Dist{}, err
		}
		pod = updated
		const patience = 10 * time.Second
		timeout := time.After(patience)
		var others []string // what came instead, for the log
	wait:
		for {
			select {
			case ev := <-arrived:
				if strings.HasPrefix(ev.Message, reason+":") || ev.Message == reason {
					lat = append(lat, time.Since(start))
					break wait
				}
				others = append(others, ev.Status+": "+ev.Message)
			case <-timeout:
				// A lost event is a result, not a reason to lose the run: counted at the
				// timeout, and told.
				fmt.Fprintf(e.Log, "bench: status latency: no event for %s in %s; the container's events meanwhile: %q\n", reason, patience, others)
				lat = append(lat, patience)
				lost++
				break wait
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	d := summarize(lat)
	d.Lost = lost
	return d, nil
}
