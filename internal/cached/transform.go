package cached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clientfeatures "k8s.io/client-go/features"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Of is the compact form of an object a cache holds (a transform for client-go's
// informers): a Deployment, pod, Service or ConfigMap becomes what readers need of it
// (cached.go); anything else is kept, without its managed fields. Its key is
// namespace/name (Key).
func Of(obj any) (any, error) {
	return OfSharing(obj, func(id string) string { return id }, false)
}

// OfSharing is Of, the container id of what it makes replaced by shared(id), so that a
// container's objects can hold its id once, not once each; byName: its key is its
// name alone (see KeysByName).
func OfSharing(obj any, shared func(string) string, byName bool) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		c := newCachedPod(container.PodOf(o), o.ResourceVersion)
		c.id, c.byName = shared(c.id), byName
		return c, nil
	case *appsv1.Deployment:
		c := newCachedDeployment(container.DeploymentOf(o), o.ResourceVersion)
		c.id, c.byName = shared(c.id), byName
		return c, nil
	case *corev1.Service:
		c := newCachedService(container.ServiceOf(o), o.ResourceVersion)
		c.id, c.byName = shared(c.id), byName
		return c, nil
	case *corev1.ConfigMap:
		c := newCachedRecord(o)
		c.id, c.byName = shared(c.id), byName
		return c, nil
	}
	// Anything else (client-go may hand an object to the transform again, a tombstone's
	// included): kept as it is, without its managed fields.
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// KeysByName reports whether the informers' caches can key a cached object by its name
// alone. client-go keys an object by "namespace/name", a string of its own for each
// object of each cache (14.5 MB at 100,000 containers, docs/model.md), but by its name
// when its namespace reads as empty: the same string as the name the object holds.
// That is safe only when every key an informer compares is taken of a transformed
// object, which holds with client-go's atomic FIFO (feature AtomicFIFO, on by default
// since v0.36: a relist reaches the cache as one replacement of transformed objects).
// Without it, a relist keys the listed objects before the transform, by
// namespace/name, and would take every cached one for deleted. The caches hold one
// namespace, so a name is unique in each.
func KeysByName() bool {
	return clientfeatures.FeatureGates().Enabled(clientfeatures.AtomicFIFO)
}

// Key is the key of the cached object named name in namespace (byName: see KeysByName).
func Key(namespace, name string, byName bool) string {
	if byName {
		return name
	}
	return namespace + "/" + name
}
