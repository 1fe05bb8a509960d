package harness

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Image prefixes that choose what kwok does with a pod (stages/fate-*.yaml). Any other
// image runs: phase Running, Ready, with a Pod IP. The registry kwok.invalid can never
// resolve, so these names cannot collide with a real image.
const (
	// FateImagePullBackOff: Pending, container waiting with reason ImagePullBackOff.
	FateImagePullBackOff = "kwok.invalid/fate/image-pull-backoff"
	// FateCrashLoopBackOff: Running, not Ready, waiting CrashLoopBackOff, 5 restarts,
	// last termination Error exit 1.
	FateCrashLoopBackOff = "kwok.invalid/fate/crash-loop-backoff"
	// FateOOMKilled: Running, not Ready, waiting CrashLoopBackOff, 3 restarts, last
	// termination OOMKilled exit 137 (a Deployment's pod restarts; it never turns Failed).
	FateOOMKilled = "kwok.invalid/fate/oom-killed"
)

// LoseNode makes a node unreachable the way a dead kubelet would look: kwok stops
// managing it (no more heartbeats or pod updates), its Ready condition turns Unknown, and
// every pod on it is marked not ready as the node lifecycle controller would after its
// grace period (MarkPodLost), without waiting for it. Use a node made with AddNode (tainted,
// so only pods bound to it by name are there), not the shared NodeName, or every other
// test in the run loses its pods too.
func LoseNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(node.Annotations, KwokNodeAnnotation)
		node, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		for i, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				node.Status.Conditions[i] = corev1.NodeCondition{
					Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
					Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.",
					LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: now,
				}
			}
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("losing node %s: %w", name, err)
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String(),
	})
	if err != nil {
		return err
	}
	for i := range pods.Items {
		if err := MarkPodLost(ctx, cs, pods.Items[i].Namespace, pods.Items[i].Name); err != nil {
			return err
		}
	}
	return nil
}

// MarkPodLost does to one pod what the node lifecycle controller does to the pods of a
// node that stopped reporting (MarkPodsNotReady): its Ready condition turns False, and
// nothing else changes (the phase stays Running, ContainersReady stays True; the kubelet
// that would keep them consistent is gone). That is what the real node showed with its
// kubelet stopped. kwok's stages only touch Pending pods, so it stays so.
func MarkPodLost(ctx context.Context, cs kubernetes.Interface, namespace, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
				pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		_, err = cs.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// SetLoadBalancerIngress plays the cloud controller: it gives a LoadBalancer Service an
// ingress IP and/or hostname.
func SetLoadBalancerIngress(ctx context.Context, cs kubernetes.Interface, namespace, name, ip, hostname string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip, Hostname: hostname}}
		_, err = cs.CoreV1().Services(namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		return err
	})
}
