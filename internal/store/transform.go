package store

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// transform is the informers' transform: cacheObject, with the id of a container's
// objects held once (the one its first cached object has, found in the index) rather
// than once per object.
func (s *Store) transform(obj any) (any, error) {
	return cacheObjectSharing(obj, s.index.sharedID)
}

// cacheObject makes every object a cache holds its compact form (cached.go).
func cacheObject(obj any) (any, error) {
	return cacheObjectSharing(obj, func(id string) string { return id })
}

// cacheObjectSharing is cacheObject, the id of what it makes replaced by shared(id).
func cacheObjectSharing(obj any, shared func(string) string) (any, error) {
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
