package store

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripForCache keeps in the caches only what readers use, since they hold every
// container's objects: no managedFields or kubectl's last-applied annotation anywhere,
// and of a Pod only its identity, labels and the status fields the status mapping and
// the API read (about a third of a Pod's size; its spec is never read).
func stripForCache(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return slimPod(p), nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		}
	}
	return obj, nil
}

func slimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{
			Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message, PodIP: p.Status.PodIP,
			Conditions: p.Status.Conditions,
		},
	}
	if n := len(p.Status.ContainerStatuses); n > 0 {
		out.Status.ContainerStatuses = make([]corev1.ContainerStatus, n)
		for i, cs := range p.Status.ContainerStatuses {
			out.Status.ContainerStatuses[i] = corev1.ContainerStatus{
				Name: cs.Name, State: cs.State, LastTerminationState: cs.LastTerminationState,
				Ready: cs.Ready, RestartCount: cs.RestartCount, Started: cs.Started,
			}
		}
	}
	return out
}
