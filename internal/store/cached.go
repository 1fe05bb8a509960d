package store

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The informer caches hold every container's Deployment, Pods, Service and record, so
// their size is most of the provider's memory. A Kubernetes object is large before it
// holds any data (a corev1.Pod struct alone is 1,240 bytes, each label map a few
// hundred), so the caches hold the service's own views instead (container.Deployment,
// Pod, Service and Record: only what the service reads; see
// internal/container/observed.go), made by the informers' transform, cacheObject. Each
// view is wrapped with what the informer machinery needs of an object (cacheMeta).
// Readers get copies of the views (byIndex), never Kubernetes objects.
// BenchmarkCacheBytesPerContainer measures the result.

type cachedDeployment struct {
	container.Deployment
	cacheMeta
}

type cachedPod struct {
	container.Pod
	cacheMeta
}

type cachedService struct {
	container.Service
	cacheMeta
}

func (c *cachedDeployment) view() container.Deployment { return c.Deployment }
func (c *cachedPod) view() container.Pod               { return c.Pod }
func (c *cachedService) view() container.Service       { return c.Service }

// viewer is a cached object: it gives a copy of its view (whose slices it shares: views
// are never written).
type viewer[V any] interface{ view() V }

// byIndex reads the views of one id's objects from an informer's cache.
func byIndex[V any](inf interface{ GetIndexer() cache.Indexer }, id string) []*V {
	var out []*V
	for _, o := range indexed(inf, id) {
		if c, ok := o.(viewer[V]); ok {
			v := c.view()
			out = append(out, &v)
		}
	}
	return out
}

// cachedRecord is a ConfigMap the record informer holds: the record, when it is one.
type cachedRecord struct {
	readOnlyMeta
	record          container.Record // when isRecord; else only its Name is set
	isRecord        bool
	namespace, id   string
	resourceVersion string
}

func newCachedRecord(l *corev1.ConfigMap) *cachedRecord {
	id := container.InstanceID(l.Labels)
	rec, ok := container.RecordOf(l, id)
	if !ok {
		rec = container.Record{Name: l.Name}
	}
	return &cachedRecord{record: rec, isRecord: ok, namespace: container.Intern(l.Namespace), id: id, resourceVersion: l.ResourceVersion}
}

// recordOf is the record of container id the cache holds, if any.
func recordOf(obj any, id string) (container.Record, bool) {
	c, ok := obj.(*cachedRecord)
	if !ok || !c.isRecord || c.id != id {
		return container.Record{}, false
	}
	return c.record, true
}

// cacheMeta is what the informers need of a cached object (metav1.Object): its
// namespace and name make its key, its labels are what the index reads (InstanceID),
// and its resourceVersion tells an update from a resync (an update whose
// resourceVersion equals the cached one is taken for a resync and reaches only handlers
// due one: without it, after the first resync check, updates would stop reaching the
// status reporter). It reads them from the view it wraps (meta points into the same
// object).
type cacheMeta struct {
	readOnlyMeta
	meta            *container.Meta
	resourceVersion string
}

func (c *cacheMeta) GetNamespace() string               { return c.meta.Namespace }
func (c *cacheMeta) GetName() string                    { return c.meta.Name }
func (c *cacheMeta) GetResourceVersion() string         { return c.resourceVersion }
func (c *cacheMeta) GetCreationTimestamp() metav1.Time  { return metav1.NewTime(c.meta.Created) }
func (c *cacheMeta) GetDeletionTimestamp() *metav1.Time { return deletionTimestamp(c.meta.Deleting) }
func (c *cacheMeta) GetLabels() map[string]string       { return labels(c.meta.ID, c.meta.Incarnation) }

// InstanceID is the object's DCM id without building its labels (see instanceIDOf).
func (c *cacheMeta) InstanceID() string { return c.meta.ID }

func (c *cachedRecord) GetNamespace() string         { return c.namespace }
func (c *cachedRecord) GetName() string              { return c.record.Name }
func (c *cachedRecord) GetUID() types.UID            { return c.record.UID }
func (c *cachedRecord) GetResourceVersion() string   { return c.resourceVersion }
func (c *cachedRecord) InstanceID() string           { return c.id }
func (c *cachedRecord) GetLabels() map[string]string { return labels(c.id, c.record.Incarnation) }
func (c *cachedRecord) GetCreationTimestamp() metav1.Time {
	return metav1.NewTime(c.record.Created)
}
func (c *cachedRecord) GetDeletionTimestamp() *metav1.Time {
	return deletionTimestamp(c.record.Terminating)
}

// labels are a cached object's labels as far as they are kept: the ones the informers
// select on, its id and its incarnation.
func labels(id, inc string) map[string]string {
	l := container.SystemLabels(id)
	if inc != "" {
		l[container.LabelIncarnation] = inc
	}
	return l
}

// deletionTimestamp is a deletion timestamp as far as it is kept: whether there is one (its
// time is not kept: it reads as the zero time).
func deletionTimestamp(deleting bool) *metav1.Time {
	if !deleting {
		return nil
	}
	return &metav1.Time{}
}

var (
	_ metav1.Object = (*cachedDeployment)(nil)
	_ metav1.Object = (*cachedPod)(nil)
	_ metav1.Object = (*cachedService)(nil)
	_ metav1.Object = (*cachedRecord)(nil)
)

// readOnlyMeta completes metav1.Object for the cached objects: nothing changes a
// cached object (the informers only key, index and hand them out), so its setters do
// nothing, and what is not kept reads as unset.
type readOnlyMeta struct{}

func (readOnlyMeta) GetNamespace() string                          { return "" }
func (readOnlyMeta) SetNamespace(string)                           {}
func (readOnlyMeta) GetName() string                               { return "" }
func (readOnlyMeta) SetName(string)                                {}
func (readOnlyMeta) GetGenerateName() string                       { return "" }
func (readOnlyMeta) SetGenerateName(string)                        {}
func (readOnlyMeta) GetUID() types.UID                             { return "" }
func (readOnlyMeta) SetUID(types.UID)                              {}
func (readOnlyMeta) GetResourceVersion() string                    { return "" }
func (readOnlyMeta) SetResourceVersion(string)                     {}
func (readOnlyMeta) GetGeneration() int64                          { return 0 }
func (readOnlyMeta) SetGeneration(int64)                           {}
func (readOnlyMeta) GetSelfLink() string                           { return "" }
func (readOnlyMeta) SetSelfLink(string)                            {}
func (readOnlyMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (readOnlyMeta) SetCreationTimestamp(metav1.Time)              {}
func (readOnlyMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (readOnlyMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (readOnlyMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (readOnlyMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (readOnlyMeta) GetLabels() map[string]string                  { return nil }
func (readOnlyMeta) SetLabels(map[string]string)                   {}
func (readOnlyMeta) GetAnnotations() map[string]string             { return nil }
func (readOnlyMeta) SetAnnotations(map[string]string)              {}
func (readOnlyMeta) GetFinalizers() []string                       { return nil }
func (readOnlyMeta) SetFinalizers([]string)                        {}
func (readOnlyMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (readOnlyMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (readOnlyMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (readOnlyMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
