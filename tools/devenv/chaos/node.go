package chaos

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// restoreNode undoes harness.LoseNode the way a kubelet that comes back does: kwok
// manages the node again (heartbeats: Ready), and the pods it runs report Ready again
// when their containers are ready (kwok's stages only move Pending pods, so the
// returning "kubelet" has to be played here). Pods whose containers are not ready (a
// crash loop) stay not Ready, as they would.
func restoreNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Annotations[harness.KwokNodeAnnotation] == "fake" {
			return nil
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[harness.KwokNodeAnnotation] = "fake"
		_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("restoring node %s: %w", name, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !nodeReady(ctx, cs, name) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready 60s after kwok took it back", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String(),
	})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || podReady(&p) || !containersReady(&p) {
			continue
		}
		if err := markPodReady(ctx, cs, p.Namespace, p.Name); err != nil {
			return err
		}
	}
	return nil
}

func nodeReady(ctx context.Context, cs kubernetes.Interface, name string) bool {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func containersReady(p *corev1.Pod) bool {
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if !c.Ready {
			return false
		}
	}
	return true
}

func markPodReady(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				pod.Status.Conditions[i].Status = corev1.ConditionTrue
				pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}
