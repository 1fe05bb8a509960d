package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// fault runs one fault: it takes something away, waits s.Down, and heals it; the entry
// spans the whole window (End is when the world was whole again). It returns the entry.
func (w *World) fault(ctx context.Context, s Step) Entry {
	e := Entry{Type: "fault", Kind: s.Kind, Step: s.N, Start: time.Now()}
	var err error
	switch s.Kind {
	case FaultPodDelete:
		err = w.deletePod(ctx, s, &e)
	case FaultFate:
		err = w.giveFate(ctx, s, &e)
	case FaultNodeLoss:
		if e.Target, err = w.busiestNode(ctx, s.Pick); err != nil {
			break
		}
		if err = harness.LoseNode(ctx, w.Env.Admin, e.Target); err == nil {
			sleep(ctx, s.Down)
		}
		// Heal even after a partial failure: a node left lost would fail every check.
		err = errors.Join(err, restoreNode(context.WithoutCancel(ctx), w.Env.Admin, e.Target))
	case FaultNATSRestart:
		w.Env.NATS.Stop()
		sleep(ctx, s.Down)
		err = w.Env.NATS.Start()
	case FaultLeaderKill, FaultReplicaStop:
		// The leader is killed, the other replica stopped; with no leader at the
		// moment (a failover under way), either one.
		r := w.Replicas[[]string{"a", "b"}[s.Pick%2]]
		if l := w.Leader(); l != nil {
			r = l
			if s.Kind == FaultReplicaStop {
				r = w.Replicas[map[string]string{"a": "b", "b": "a"}[l.Name]]
			}
		}
		e.Via = r.Name
		e.Proc, _ = r.Current()
		r.Stop(s.Kind == FaultReplicaStop)
		sleep(ctx, s.Down)
		err = r.Start(context.WithoutCancel(ctx))
	case FaultRegistryRestart:
		w.Registry.Stop()
		sleep(ctx, s.Down)
		err = w.Registry.Start()
	case FaultWatchBlock, FaultWatchBreak, FaultAPIDelay, FaultAPIDrop:
		err = w.proxyFault(ctx, s, &e)
	case FaultAPIServerRestart:
		if err = w.Env.Cluster.StopComponent("kube-apiserver"); err == nil {
			sleep(ctx, s.Down)
		}
		err = errors.Join(err, w.Env.Cluster.StartComponent(context.WithoutCancel(ctx), "kube-apiserver"))
	default:
		err = fmt.Errorf("unknown fault %q", s.Kind)
	}
	if err != nil {
		e.Err = err.Error()
	}
	e.End = time.Now()
	return w.Hist.Add(e)
}

// proxyFault switches the fault on in one replica's proxy for s.Down, then heals it.
// The entry names the replica (Via), the process it served then (Proc), what was hit
// (Target: the resource, the latency or the share of answers lost) and what the proxy
// did (Note: watches held or cut, answers delayed or lost).
func (w *World) proxyFault(ctx context.Context, s Step, e *Entry) error {
	p := w.Proxies[s.Via[0]]
	if p == nil {
		return fmt.Errorf("no proxy for replica %q", s.Via[0])
	}
	f := ProxyFault{Kind: s.Kind, Resource: s.Resource, Latency: s.Latency, Percent: s.Percent, Seed: s.Pick}
	e.Via, e.Target = s.Via[0], f.String()
	e.Proc, _ = w.Replicas[s.Via[0]].Current()
	p.Set(f)
	sleep(ctx, s.Down)
	held, broken, delayed, dropped := p.Set(ProxyFault{})
	e.Count = held + broken + delayed + dropped
	e.Detail = fmt.Sprintf("held %d, broken %d, delayed %d, lost %d", held, broken, delayed, dropped)
	return nil
}

// busiestNode is the node running most of the containers' pods (ties broken by pick):
// losing a node where nothing runs tests nothing, and the scheduler may well have put
// every pod on one node.
func (w *World) busiestNode(ctx context.Context, pick uint64) (string, error) {
	pods, err := w.Env.Admin.CoreV1().Pods(w.NS).List(ctx, metav1.ListOptions{LabelSelector: container.Selector})
	if err != nil {
		return "", err
	}
	count := map[string]int{}
	for _, p := range pods.Items {
		count[p.Spec.NodeName]++
	}
	best := nodeNames[pick%uint64(len(nodeNames))]
	for _, n := range nodeNames {
		if count[n] > count[best] {
			best = n
		}
	}
	return best, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// deletePod deletes one container's pod, as an eviction or `kubectl delete pod` would.
func (w *World) deletePod(ctx context.Context, s Step, e *Entry) error {
	pods, err := w.Env.Admin.CoreV1().Pods(w.NS).List(ctx, metav1.ListOptions{LabelSelector: container.Selector})
	if err != nil {
		return err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		e.Note = "no pod to delete"
		return nil
	}
	p := live[s.Pick%uint64(len(live))]
	e.Target, e.ID = p.Name, container.InstanceID(p.Labels)
	return w.Env.Admin.CoreV1().Pods(w.NS).Delete(ctx, p.Name, metav1.DeleteOptions{})
}

// giveFate makes a running container's workload crash-loop, OOM-loop or fail to pull
// its image, by setting its Deployment's image to a fate image (a bad rollout). Only a
// container on the normal image is chosen: the old pod keeps running beside the new one
// (maxUnavailable 0), so the container stays RUNNING whatever the fate; what changes is
// which of two pods speaks.
func (w *World) giveFate(ctx context.Context, s Step, e *Entry) error {
	e.Image = s.Fate
	deps, err := w.Env.Admin.AppsV1().Deployments(w.NS).List(ctx, metav1.ListOptions{LabelSelector: container.Selector})
	if err != nil {
		return err
	}
	var normal []appsv1.Deployment
	for _, d := range deps.Items {
		if d.DeletionTimestamp == nil && len(d.Spec.Template.Spec.Containers) > 0 && d.Spec.Template.Spec.Containers[0].Image == normalImage {
			normal = append(normal, d)
		}
	}
	if len(normal) == 0 {
		e.Note = "no container on the normal image"
		return nil
	}
	d := normal[s.Pick%uint64(len(normal))]
	e.Target, e.ID = d.Name, container.InstanceID(d.Labels)
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, d.Spec.Template.Spec.Containers[0].Name, s.Fate)
	_, err = w.Env.Admin.AppsV1().Deployments(w.NS).Patch(ctx, d.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}
