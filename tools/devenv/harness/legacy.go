package harness

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// MakeLegacyContainer creates container id the way versions before container records
// did: a reservation Lease owning the Deployment and the Service, the Deployment held by
// the status finalizer. With those ties, deleting the Lease deletes the container; the
// provider's reporter and `release` must remove them first.
func MakeLegacyContainer(ctx context.Context, cs kubernetes.Interface, ns, id string) error {
	lease, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: container.RecordName(id), Labels: map[string]string{container.LabelManagedBy: container.ManagedByValue, container.LabelInstanceID: id},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	owner := []metav1.OwnerReference{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: lease.Name, UID: lease.UID}}
	labels := container.SystemLabels(id)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: id, Labels: labels, OwnerReferences: owner, Finalizers: []string{container.LegacyFinalizer}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: id, Image: "nginx:1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: id, Labels: labels, OwnerReferences: owner},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	return err
}
