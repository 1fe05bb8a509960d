package store

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// cacheObject is the informers' transform: every object a cache holds becomes its view.
func cacheObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		c := &cachedPod{Pod: container.PodOf(o)}
		c.cacheMeta = cacheMeta{meta: &c.Meta, resourceVersion: o.ResourceVersion}
		return c, nil
	case *appsv1.Deployment:
		c := &cachedDeployment{Deployment: container.DeploymentOf(o)}
		c.cacheMeta = cacheMeta{meta: &c.Meta, resourceVersion: o.ResourceVersion}
		return c, nil
	case *corev1.Service:
		c := &cachedService{Service: container.ServiceOf(o)}
		c.cacheMeta = cacheMeta{meta: &c.Meta, resourceVersion: o.ResourceVersion}
		return c, nil
	case *corev1.ConfigMap:
		return newCachedRecord(o), nil
	}
	// Anything else (client-go may hand an object to the transform again, a tombstone's
	// included): kept as it is, without its managed fields.
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
