package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Stop takes the node down and puts the machine back as it was: the pods on it are
// deleted so the kubelet tears them down through CRI (CNI DEL frees their addresses),
// the kubelet and containerd are stopped by PID, then whatever is left is removed (see
// cleanupRealNode). Safe to call more than once, and from any process.
func (n *RealNode) Stop() error {
	unlock, err := lockRealNode()
	if err != nil {
		return err
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return n.stop(ctx)
}

func (n *RealNode) stop(ctx context.Context) error {
	n.reload()
	out := n.out
	if out == nil {
		out = io.Discard
	}
	cs, _ := n.client()
	if k := n.rec.Kubelet; k != nil && k.running() && cs != nil {
		if err := drainRealNode(ctx, cs); err != nil {
			fmt.Fprintf(out, "harness: real node: pods not torn down by the kubelet (%v); removing them by force\n", err)
		}
		n.waitNoTasks(ctx, 20*time.Second)
	}
	if n.rec.Kubelet != nil {
		n.rec.Kubelet.stop(15 * time.Second)
	}
	if p := n.rec.NetworkPolicies; p != nil {
		p.stop(10 * time.Second) // on SIGTERM it removes its rules (table or chain)
	}
	if cs != nil {
		// Best effort: the control plane may be gone already (sp-harness down, a crash).
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = cs.CoreV1().Nodes().Delete(dctx, RealNodeName, metav1.DeleteOptions{})
		cancel()
	}
	if c := n.rec.Containerd; c != nil && c.running() {
		n.killTasks(ctx)
		c.stop(15 * time.Second)
	}
	if r := n.rec.ImageRegistry; r != nil {
		r.stop(5 * time.Second)
	}
	return cleanupRealNode(ctx, out)
}

// drainRealNode cordons the node (so ReplicaSets' replacements stay Pending instead of
// coming back) and deletes its pods, waiting until the kubelet has removed them.
func drainRealNode(ctx context.Context, cs kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	_, err := cs.CoreV1().Nodes().Patch(ctx, RealNodeName, types.MergePatchType,
		[]byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("cordoning: %w", err)
	}
	list := func() ([]corev1.Pod, error) {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", RealNodeName).String(),
		})
		if err != nil {
			return nil, err
		}
		return pods.Items, nil
	}
	pods, err := list()
	if err != nil {
		return err
	}
	grace := int64(2)
	for _, p := range pods {
		err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for {
		pods, err := list()
		if err == nil && len(pods) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			names := make([]string, 0, len(pods))
			for _, p := range pods {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			return errors.Join(fmt.Errorf("pods still on the node: %s", strings.Join(names, ", ")), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitNoTasks waits for the kubelet to stop the pod sandboxes too (they go after the pod
// objects).
func (n *RealNode) waitNoTasks(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		out, err := n.ctr(ctx, "tasks", "ls", "-q")
		if err == nil && strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// killTasks kills and deletes, through containerd, whatever tasks the kubelet left, so
// the shims exit and unmount the containers' root filesystems themselves.
func (n *RealNode) killTasks(ctx context.Context) {
	out, err := n.ctr(ctx, "tasks", "ls", "-q")
	if err != nil {
		return
	}
	ids := strings.Fields(out)
	for _, id := range ids {
		_, _ = n.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", id)
	}
	for _, id := range ids {
		for range 20 {
			if _, err := n.ctr(ctx, "tasks", "delete", "-f", id); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if out, err := n.ctr(ctx, "containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = n.ctr(ctx, "containers", "delete", id)
		}
	}
}

// CleanupRealNodeLeftovers stops this machine's real node, whoever started it and
// whether or not its processes still run, and removes everything it left (see
// cleanupRealNode). StartRealNode does this itself after a crashed run; this is for
// `sp-harness clean-real-node`.
func CleanupRealNodeLeftovers(out io.Writer) error {
	if err := RealNodeSupported(); err != nil {
		return err
	}
	unlock, err := lockRealNode()
	if err != nil {
		return err
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if n, err := recordedRealNode(); err == nil {
		n.out = out
		return n.stop(ctx)
	}
	return cleanupRealNode(ctx, out)
}
