package cached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Of is the compact form of an object a cache holds (a transform for client-go's
// informers): a Deployment, pod, Service or ConfigMap becomes what readers need of it
// (cached.go); anything else is kept, without its managed fields.
func Of(obj any) (any, error) {
	return OfSharing(obj, func(id string) string { return id })
}

// OfSharing is Of, the container id of what it makes replaced by shared(id): so a
// container's objects can hold its id once, not once each.
func OfSharing(obj any, shared func(string) string) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		c := newCachedPod(container.PodOf(o), o.ResourceVersion)
		c.id = shared(c.id)
		return c, nil
	case *appsv1.Deployment:
		c := newCachedDeployment(container.DeploymentOf(o), o.ResourceVersion)
		c.id = shared(c.id)
		return c, nil
	case *corev1.Service:
		c := newCachedService(container.ServiceOf(o), o.ResourceVersion)
		c.id = shared(c.id)
		return c, nil
	case *corev1.ConfigMap:
		c := newCachedRecord(o)
		c.id = shared(c.id)
		return c, nil
	}
	// Anything else (client-go may hand an object to the transform again, a tombstone's
	// included): kept as it is, without its managed fields.
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
