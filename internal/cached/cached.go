package cached

import (
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The informer caches hold every container's Deployment, Pods, Service and record, so
// their size is most of the provider's memory. A Kubernetes object is large before it
// holds any data (a corev1.Pod struct alone is 1,240 bytes, each label map a few
// hundred), and even the service's views of them (container.Deployment, Pod, Service
// and Record: only what the service reads) are a few hundred bytes of headers, times
// and pointers. So the caches hold compact structs of their own (below, made of the
// pieces in compact.go and packed.go), made by the informers' transform (Of), which
// give the views back exactly (view). Readers get views (AppendView, RecordOf), never
// Kubernetes objects. The store's BenchmarkCacheBytesPerContainer measures the result,
// and TestCompactGivesTheViewBack that nothing is lost.

type cachedDeployment struct {
	compactMeta
	uid             uuidOr
	resourceVersion version
	// genLen: GenerateName is the name's first genLen bytes (a generated name starts
	// with it); when it is not, generateName is it.
	genLen       int32
	generateName unique.Handle[string]
	replicas     int32
	hasReplicas  bool
	userLabels   container.Labels
	// spec packs the container and its resources (packContainer).
	spec       string
	conditions unique.Handle[deploymentConditions]
	changed    stamp
}

func newCachedDeployment(d container.Deployment, rv string) *cachedDeployment {
	c := &cachedDeployment{compactMeta: compactMetaOf(d.Meta), uid: uuidOf(string(d.UID)), resourceVersion: versionOf(rv), userLabels: d.UserLabels,
		spec:       packContainer(d.Container, d.Resources),
		conditions: unique.Make(deploymentConditions{d.Available, d.Progressing, d.ReplicaFailure}),
		changed:    stampOf(d.Changed)}
	if strings.HasPrefix(d.Name, d.GenerateName) {
		c.genLen = int32(len(d.GenerateName))
	} else {
		c.genLen, c.generateName = -1, unique.Make(d.GenerateName)
	}
	if d.Replicas != nil {
		c.replicas, c.hasReplicas = *d.Replicas, true
	}
	return c
}

func (c *cachedDeployment) view() container.Deployment {
	d := container.Deployment{Meta: c.meta(), UID: types.UID(c.uid.String()), UserLabels: c.userLabels, Changed: c.changed.time()}
	if c.genLen >= 0 {
		d.GenerateName = c.name[:c.genLen]
	} else {
		d.GenerateName = c.generateName.Value()
	}
	if c.hasReplicas {
		r := c.replicas
		d.Replicas = &r
	}
	d.Container, d.Resources = unpackContainer(c.spec)
	conds := c.conditions.Value()
	d.Available, d.Progressing, d.ReplicaFailure = conds.available, conds.progressing, conds.replicaFailure
	return d
}

type cachedPod struct {
	compactMeta
	resourceVersion version
	state           unique.Handle[podState]
	// messages packs the state's messages (packStrings; "" when it has none).
	messages string
	ip       string
	changed  stamp
}

func newCachedPod(p container.Pod, rv string) *cachedPod {
	st, msg := podStateOf(&p)
	return &cachedPod{compactMeta: compactMetaOf(p.Meta), resourceVersion: versionOf(rv), state: unique.Make(st),
		messages: packStrings(msg[:]), ip: p.IP, changed: stampOf(p.Changed)}
}

func (c *cachedPod) view() container.Pod {
	p := container.Pod{Meta: c.meta(), IP: c.ip, Changed: c.changed.time()}
	st := c.state.Value()
	st.fill(&p, unpackStrings(c.messages, podMessages))
	return p
}

type cachedService struct {
	compactMeta
	resourceVersion version
	uid             uuidOr
	serviceType     corev1.ServiceType
	clusterIP       string
	// ports packs its ports (packServicePorts).
	ports      string
	externalIP string
}

func newCachedService(s container.Service, rv string) *cachedService {
	return &cachedService{compactMeta: compactMetaOf(s.Meta), resourceVersion: versionOf(rv), uid: uuidOf(string(s.UID)),
		serviceType: s.Type, clusterIP: s.ClusterIP, ports: packServicePorts(s.Ports), externalIP: s.ExternalIP}
}

func (c *cachedService) view() container.Service {
	return container.Service{Meta: c.meta(), UID: types.UID(c.uid.String()), Type: c.serviceType,
		ClusterIP: c.clusterIP, Ports: unpackServicePorts(c.ports), ExternalIP: c.externalIP}
}

// viewer is a cached object: it gives a copy of its view (whose slices it shares: views
// are never written).
type viewer[V any] interface{ view() V }

// AppendView appends the view of the object with key (Key) in an informer's cache, if
// the cache holds it (the index may name an object the cache has just dropped).
func AppendView[V any](out []*V, c Keyed, key string) []*V {
	obj, ok, _ := c.GetByKey(key)
	if cached, isView := obj.(viewer[V]); ok && isView {
		v := cached.view()
		out = append(out, &v)
	}
	return out
}

// Keyed is a cache read by key: an informer's, or one with this replica's writes on top.
type Keyed interface {
	GetByKey(key string) (any, bool, error)
}

// cachedRecord is a ConfigMap the record informer holds: the record, when it is one.
type cachedRecord struct {
	readOnlyMeta
	name, id        string
	namespace       unique.Handle[string]
	uid             uuidOr
	resourceVersion version
	created         stamp
	// isRecord: it is container id's record; else only its name is kept.
	isRecord, owed, terminating bool
	byName                      bool // as compactMeta's
}

func newCachedRecord(l *corev1.ConfigMap) *cachedRecord {
	id := container.InstanceID(l.Labels)
	c := &cachedRecord{name: l.Name, id: id, namespace: unique.Make(l.Namespace), resourceVersion: versionOf(l.ResourceVersion)}
	if rec, ok := container.RecordOf(l, id); ok {
		c.isRecord, c.uid = true, uuidOf(string(rec.UID))
		c.owed, c.terminating, c.created = rec.Owed, rec.Terminating, stampOf(rec.Created)
	}
	return c
}

func (c *cachedRecord) record() container.Record {
	if !c.isRecord {
		return container.Record{Name: c.name}
	}
	return container.Record{Name: c.name, UID: types.UID(c.uid.String()),
		Owed: c.owed, Terminating: c.terminating, Created: c.created.time()}
}

// RecordOf is the record of container id in obj, a cached ConfigMap, if it is one.
func RecordOf(obj any, id string) (container.Record, bool) {
	c, ok := obj.(*cachedRecord)
	if !ok || !c.isRecord || c.id != id {
		return container.Record{}, false
	}
	return c.record(), true
}

// What the informers need of a cached object (metav1.Object): its namespace and name
// make its key, its labels are what the handlers read (InstanceID), and its
// resourceVersion tells an update from a resync (an update whose resourceVersion equals
// the cached one is taken for a resync and reaches only handlers due one: without it,
// after the first resync check, updates would stop reaching the status reporter).

func (c *compactMeta) GetNamespace() string               { return namespaceOf(c.namespace, c.byName) }
func (c *compactMeta) GetName() string                    { return c.name }
func (c *compactMeta) GetCreationTimestamp() metav1.Time  { return metav1.NewTime(c.created.time()) }
func (c *compactMeta) GetDeletionTimestamp() *metav1.Time { return deletionTimestamp(c.deleting) }
func (c *compactMeta) GetLabels() map[string]string {
	return labels(c.id, c.incarnation.String())
}

// InstanceID is the object's DCM id without building its labels (see instanceIDOf).
func (c *compactMeta) InstanceID() string { return c.id }

func (c *cachedDeployment) GetResourceVersion() string { return c.resourceVersion.String() }
func (c *cachedDeployment) GetUID() types.UID          { return types.UID(c.uid.String()) }
func (c *cachedPod) GetResourceVersion() string        { return c.resourceVersion.String() }
func (c *cachedService) GetResourceVersion() string    { return c.resourceVersion.String() }
func (c *cachedService) GetUID() types.UID             { return types.UID(c.uid.String()) }

func (c *cachedRecord) GetNamespace() string         { return namespaceOf(c.namespace, c.byName) }
func (c *cachedRecord) GetName() string              { return c.name }
func (c *cachedRecord) GetUID() types.UID            { return types.UID(c.uid.String()) }
func (c *cachedRecord) GetResourceVersion() string   { return c.resourceVersion.String() }
func (c *cachedRecord) InstanceID() string           { return c.id }
func (c *cachedRecord) GetLabels() map[string]string { return labels(c.id, "") }
func (c *cachedRecord) GetCreationTimestamp() metav1.Time {
	return metav1.NewTime(c.created.time())
}
func (c *cachedRecord) GetDeletionTimestamp() *metav1.Time {
	return deletionTimestamp(c.terminating)
}

// namespaceOf is a cached object's namespace as client-go reads it: none when it is
// keyed by its name alone (KeysByName).
func namespaceOf(ns unique.Handle[string], byName bool) string {
	if byName {
		return ""
	}
	return ns.Value()
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

// runtime.Objects, as client-go's caches expect of what they hold. Nothing changes a
// cached object, so a copy is the object itself.

func (c *cachedDeployment) DeepCopyObject() runtime.Object { return c }
func (c *cachedPod) DeepCopyObject() runtime.Object        { return c }
func (c *cachedService) DeepCopyObject() runtime.Object    { return c }
func (c *cachedRecord) DeepCopyObject() runtime.Object     { return c }
func (readOnlyMeta) GetObjectKind() schema.ObjectKind      { return schema.EmptyObjectKind }

var (
	_ metav1.Object  = (*cachedDeployment)(nil)
	_ metav1.Object  = (*cachedPod)(nil)
	_ metav1.Object  = (*cachedService)(nil)
	_ metav1.Object  = (*cachedRecord)(nil)
	_ runtime.Object = (*cachedDeployment)(nil)
	_ runtime.Object = (*cachedPod)(nil)
	_ runtime.Object = (*cachedService)(nil)
	_ runtime.Object = (*cachedRecord)(nil)
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
