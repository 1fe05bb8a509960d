package cached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Kind is the kind of a cached object.
type Kind uint8

const (
	Deployments Kind = iota
	Pods
	Services
	Records
	kinds // how many
)

// Object is a Kubernetes object as the table takes it (Of): the id of the container it
// belongs to ("" when it is none's) and the part the table keeps of it. It is what a
// reflector's watch-list holds while it streams the initial list (the reflector keeps
// it in a store of its own, keyed by name, until the list ends), so it is a
// runtime.Object with the metadata a key needs.
type Object struct {
	readOnlyMeta
	kind Kind
	id   string
	dep  *cachedDeployment
	pod  *cachedPod
	svc  *cachedService
	rec  *cachedRecord
}

// Of is what the table keeps of obj, a Deployment, pod, Service or ConfigMap (the
// reflectors' transform); false for anything else. An Object is its own.
func Of(obj any) (*Object, bool) {
	switch o := obj.(type) {
	case *Object:
		return o, true
	case *appsv1.Deployment:
		return &Object{kind: Deployments, id: container.InstanceID(o.Labels),
			dep: newCachedDeployment(container.DeploymentOf(o), o.ResourceVersion)}, true
	case *corev1.Pod:
		return &Object{kind: Pods, id: container.InstanceID(o.Labels), pod: newCachedPod(container.PodOf(o), o.ResourceVersion)}, true
	case *corev1.Service:
		return &Object{kind: Services, id: container.InstanceID(o.Labels),
			svc: newCachedService(container.ServiceOf(o), o.ResourceVersion)}, true
	case *corev1.ConfigMap:
		id := container.InstanceID(o.Labels)
		return &Object{kind: Records, id: id, rec: newCachedRecord(o, id)}, true
	case cache.DeletedFinalStateUnknown:
		return Of(o.Obj)
	}
	return nil, false
}

// Transform is Of as a client-go transform: anything Of does not take is kept as it is.
func Transform(obj any) (any, error) {
	if o, ok := Of(obj); ok {
		return o, nil
	}
	return obj, nil
}

// ID is the id of the container the object belongs to.
func (o *Object) ID() string { return o.id }

// Kind is the object's kind.
func (o *Object) Kind() Kind { return o.kind }

// part is the object's part (a pointer: no copy).
func (o *Object) part() part {
	switch o.kind {
	case Deployments:
		return o.dep
	case Pods:
		return o.pod
	case Services:
		return o.svc
	}
	return o.rec
}

func (o *Object) GetName() string  { return o.part().partName() }
func (o *Object) version() version { return o.part().partVersion() }

func (o *Object) GetResourceVersion() string { return o.version().String() }

// GetNamespace is empty: the table is of one namespace, so a name is a key.
func (o *Object) GetNamespace() string { return "" }

func (o *Object) GetUID() types.UID {
	switch o.kind {
	case Deployments:
		return types.UID(o.dep.uid.String())
	case Services:
		return types.UID(o.svc.uid.String())
	case Records:
		return types.UID(o.rec.uid.String())
	}
	return ""
}

// Nothing changes an Object, so a copy is the object itself.
func (o *Object) DeepCopyObject() runtime.Object      { return o }
func (readOnlyMeta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

var (
	_ metav1.Object  = (*Object)(nil)
	_ runtime.Object = (*Object)(nil)
)

// readOnlyMeta completes metav1.Object for Object: nothing changes it (a reflector only
// keys it), so its setters do nothing, and what is not kept reads as unset.
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
