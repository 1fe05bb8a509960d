package store

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// kind is the kind of a cached object; each has one informer.
type kind int

const (
	deployments kind = iota
	pods
	services
	records
	kinds // how many
)

// object is what an informer keeps of a Kubernetes object (its transform): the
// metadata its key and the written overlay need, the id of the container it belongs to
// ("" for none), and the view internal/container reads of it.
type object struct {
	Namespace, Name, ResourceVersion string
	UID                              types.UID
	kind                             kind
	id                               string
	dep                              *container.Deployment
	pod                              *container.Pod
	svc                              *container.Service
	rec                              *container.Record // nil for a ConfigMap that is not its container's record
}

// GetObjectKind and DeepCopyObject make an object a runtime.Object, as an informer's
// store needs. Nothing changes an object once made, so a copy is the object itself.
func (o *object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (o *object) DeepCopyObject() runtime.Object   { return o }

// GetObjectMeta is the metadata the informer's keys are made of, made on demand: a
// whole ObjectMeta in every object would cost a kilobyte per container.
func (o *object) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}
}

// objectOf is what an informer keeps of obj; false for anything but the four kinds.
// An object is its own: client-go may transform an object twice.
func objectOf(obj any) (*object, bool) {
	var o *object
	switch x := obj.(type) {
	case *object:
		return x, true
	case cache.DeletedFinalStateUnknown:
		return objectOf(x.Obj)
	case *appsv1.Deployment:
		d := container.DeploymentOf(x)
		o = &object{kind: deployments, dep: &d}
	case *corev1.Pod:
		p := container.PodOf(x)
		o = &object{kind: pods, pod: &p}
	case *corev1.Service:
		s := container.ServiceOf(x)
		o = &object{kind: services, svc: &s}
	case *corev1.ConfigMap:
		o = &object{kind: records}
		if rec, ok := container.RecordOf(x, container.InstanceID(x.Labels)); ok {
			o.rec = &rec
		}
	default:
		return nil, false
	}
	m := obj.(metav1.Object)
	o.Namespace, o.Name, o.UID, o.ResourceVersion = container.Intern(m.GetNamespace()), m.GetName(), m.GetUID(), m.GetResourceVersion()
	o.id = container.InstanceID(m.GetLabels())
	return o, true
}

// transform is objectOf as the informers' TransformFunc.
func transform(obj any) (any, error) {
	if o, ok := objectOf(obj); ok {
		return o, nil
	}
	return obj, nil
}

// version is a resourceVersion as a number; 0 for one that is not (the apiserver's
// are: etcd's revisions).
func version(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}
