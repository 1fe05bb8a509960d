package store

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// packForCache is the informers' transform: every object a cache holds is packed (see
// packed.go), keeping of each kind its identity, labels and the fields the API resource
// and the status mapping are made from. A reader needing more must add it there.
func packForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return packPod(o), nil
	case *appsv1.Deployment:
		return packDeployment(o), nil
	case *corev1.Service:
		return packService(o), nil
	case *coordinationv1.Lease:
		return packRecord(o), nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
