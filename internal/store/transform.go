package store

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// stripForCache keeps in the caches only what readers use, since they hold every
// container's objects (5000 containers are 15000 objects): of each kind, its identity,
// labels and the fields the API resource and the status mapping are made from. No
// managedFields, no pod spec, no ReplicaSet bookkeeping. What is kept is listed field by
// field below; a reader needing more must add it here.
func stripForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		p := slimPod(o)
		internPod(p)
		return p, nil
	case *appsv1.Deployment:
		d := slimDeployment(o)
		internDeployment(d)
		return d, nil
	case *corev1.Service:
		v := slimService(o)
		internService(v)
		return v, nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		}
	}
	return obj, nil
}

func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, Generation: m.Generation, Labels: m.Labels,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers,
	}
}

func slimDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	out := &appsv1.Deployment{ObjectMeta: slimMeta(d.ObjectMeta)}
	if a, ok := d.Annotations[container.AnnotationResources]; ok {
		out.Annotations = map[string]string{container.AnnotationResources: a}
	}
	out.Spec.Replicas = d.Spec.Replicas
	for _, c := range d.Spec.Template.Spec.Containers {
		out.Spec.Template.Spec.Containers = append(out.Spec.Template.Spec.Containers, corev1.Container{
			Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Env: c.Env, Ports: c.Ports, Resources: c.Resources,
		})
	}
	out.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Status.ObservedGeneration, Replicas: d.Status.Replicas,
		AvailableReplicas: d.Status.AvailableReplicas, Conditions: d.Status.Conditions,
	}
	return out
}

func slimService(s *corev1.Service) *corev1.Service {
	out := &corev1.Service{ObjectMeta: slimMeta(s.ObjectMeta)}
	out.Spec = corev1.ServiceSpec{Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, Ports: s.Spec.Ports}
	out.Status.LoadBalancer = s.Status.LoadBalancer
	return out
}

func slimPod(p *corev1.Pod) *corev1.Pod {
	m := slimMeta(p.ObjectMeta)
	m.OwnerReferences = nil
	out := &corev1.Pod{
		ObjectMeta: m,
		// Readiness gates decide whether Ready=False with ContainersReady=True means a
		// lost node (see container.StatusOf).
		Spec: corev1.PodSpec{ReadinessGates: p.Spec.ReadinessGates},
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
