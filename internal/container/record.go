package container

import (
	"maps"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Every container has a record: a ConfigMap named after its id (RecordName), with no
// data. Creating it is how an id is reserved (creating an object is atomic in the
// apiserver, so of any number of concurrent creates with one id, across replicas,
// exactly one succeeds), and it owns the container's Deployment and Service
// (ownerReferences, OwnedBy): deleting the record deletes them, by Kubernetes' garbage
// collector, whatever a lost answer, a race or a crash left. Its UID is the container's
// incarnation: a later container with the same id has another record, so another UID.
// A ConfigMap, not a Lease: DCM's own Helm chart grants its providers ConfigMaps and
// no Leases.
//
// The record is made with RecordFinalizer on, so a deleted record (a DELETE, or a
// kubectl delete) stays, with its deletion timestamp, until the status controller has
// delivered the container's DELETED and takes the finalizer off. A deletion timestamp
// never goes back: a cache that shows one shows a container that was deleted.
const (
	// LabelRecord marks a ConfigMap as a container record: the record informer selects
	// on it (RecordSelector), so it never caches the namespace's other ConfigMaps.
	LabelRecord = "dcm.project/record"
	RecordValue = "container"

	// LabelIncarnation is on a container's pods (its Deployment's pod template) and in
	// the Deployment's and the Service's selectors, with the record's UID: so they
	// select only this container's pods, never those of an earlier container with the
	// same id that are still terminating. The Deployment and the Service say their
	// incarnation with their ownerReference, not with a label.
	LabelIncarnation = "dcm.project/incarnation"

	// RecordFinalizer keeps a deleted record until its container's DELETED has been
	// delivered; the status controller removes it then.
	RecordFinalizer = "dcm.project/deleted-report-owed"
)

// RecordName is the ConfigMap that holds a container id.
func RecordName(id string) string { return "dcm-container-" + id }

// RecordSelector selects the records (and nothing else of the namespace's ConfigMaps).
const RecordSelector = Selector + "," + LabelRecord + "=" + RecordValue

// Record is what the store and the status controller read of a container's record.
type Record struct {
	Name string
	// UID is the container's incarnation.
	UID types.UID
	// Owed: RecordFinalizer is on, so once the record is deleted (Terminating), DCM is
	// owed the container's DELETED. A record without it is one whose DELETED was
	// delivered (or that someone stripped of it by hand).
	Owed bool
	// Terminating: the record was deleted (its finalizers keep it a while): the
	// container is deleted.
	Terminating bool
	Created     time.Time
	// Request is what the record keeps of the create that made it.
	Request Request
}

// RecordOf reads an object (a ConfigMap) as the record of container id; false when it
// is not one (an object of someone else that happens to have the name). Recognised by
// name and by the id's labels.
func RecordOf(m metav1.Object, id string) (Record, bool) {
	if isNil(m) || m.GetName() != RecordName(id) || m.GetLabels()[LabelManagedBy] != ManagedByValue || InstanceID(m.GetLabels()) != id {
		return Record{}, false
	}
	return Record{
		Name: m.GetName(), UID: m.GetUID(),
		Owed:        slices.Contains(m.GetFinalizers(), RecordFinalizer),
		Terminating: m.GetDeletionTimestamp() != nil,
		Created:     m.GetCreationTimestamp().Time,
		Request:     Request{Key: m.GetAnnotations()[AnnotationIdempotencyKey], Digest: m.GetAnnotations()[AnnotationRequestDigest]},
	}, true
}

// isNil: a nil pointer in an interface (a failed Get's object) is no object.
func isNil(m metav1.Object) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// NewRecord is the record of container id, as a create made by req writes it:
// RecordFinalizer on from the start, so that no later write is needed to keep a DELETED
// owed; req's key and digest when it sent a key.
func NewRecord(id string, req Request) *corev1.ConfigMap {
	l := SystemLabels(id)
	l[LabelRecord] = RecordValue
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName(id), Labels: l, Finalizers: []string{RecordFinalizer}}}
	if req.Key != "" {
		c.Annotations = map[string]string{AnnotationIdempotencyKey: req.Key, AnnotationRequestDigest: req.Digest}
	}
	return c
}

// IncarnationOf is a Kubernetes object's incarnation (see Meta.Incarnation): the UID of
// the record that controls it (a Deployment, a Service), else its LabelIncarnation (a
// pod, whose controller is a ReplicaSet); "" when it has neither.
func IncarnationOf(m metav1.Object) string {
	for _, r := range m.GetOwnerReferences() {
		if r.Kind == "ConfigMap" && r.APIVersion == "v1" && r.Controller != nil && *r.Controller {
			return string(r.UID)
		}
	}
	return m.GetLabels()[LabelIncarnation]
}

// OwnedBy returns copies of the objects owned by the record named name with UID uid:
// each with an ownerReference to it (the controller reference, so it has no other),
// the pod template labelled with the incarnation and the selectors selecting on it.
//
// BlockOwnerDeletion stays unset: setting it needs the update verb on
// configmaps/finalizers where the OwnerReferencesPermissionEnforcement admission plugin
// runs (OpenShift), which DCM's Role does not grant. Nothing needs it: a DELETE deletes
// the Deployment and the Service its cache shows itself, and the garbage collector
// deletes any other dependent once the record is gone (its DELETED delivered), blocking
// or not. A foreground delete of the record makes the collector delete non-blocking
// dependents early only when it looks at them before it lets go of the record's
// foregroundDeletion finalizer, which it does at once when nothing blocks.
func (o Objects) OwnedBy(name string, uid types.UID) Objects {
	stamp := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		if m == nil {
			m = map[string]string{}
		}
		m[LabelIncarnation] = string(uid)
		return m
	}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: uid, Controller: ptrTo(true)}}
	out := Objects{Deployment: o.Deployment.DeepCopy(), Request: o.Request}
	d := out.Deployment
	d.OwnerReferences = owner
	d.Spec.Template.Labels = stamp(d.Spec.Template.Labels)
	if d.Spec.Selector != nil {
		d.Spec.Selector.MatchLabels = stamp(d.Spec.Selector.MatchLabels)
	}
	if o.Service != nil {
		out.Service = o.Service.DeepCopy()
		out.Service.OwnerReferences = slices.Clone(owner)
		out.Service.Spec.Selector = stamp(out.Service.Spec.Selector)
	}
	return out
}
