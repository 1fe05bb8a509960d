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
// data: its labels and its finalizer are the record. Creating it is how an id is
// reserved (creating an object is atomic in the apiserver, so of any number of
// concurrent creates with one id, across replicas, exactly one succeeds), and it outlives
// the container's workload for as long as DCM is still owed the container's DELETED.
// A ConfigMap, not a Lease: DCM's own Helm chart grants its providers ConfigMaps and no
// Leases.
//
// Nothing is owned by the record and the record is owned by nothing: deleting records by
// hand never touches a workload, and deleting a workload
// (DELETE, kubectl) removes it at once, as Kubernetes users expect. A record deleted by
// hand is restored from the live Deployment; a record whose DELETED is owed carries
// RecordFinalizer, so even a deleted record is kept until DCM has been told.
const (
	// LabelRecord marks a ConfigMap as a container record: the record informer selects
	// on it (RecordSelector), so it never caches the namespace's other ConfigMaps.
	// RecordOf does not require it: a record is recognised by its name and the id's
	// labels (managed-by, instance id), and one found without it is relabelled
	// (EnsureRecord writes RecordLabels).
	LabelRecord = "dcm.project/record"
	RecordValue = "container"

	// LabelIncarnation tells one container with an id from an earlier or later one with
	// the same id: on the record, the Deployment, its pods (so the Deployment's and the
	// Service's selectors pick only this incarnation's pods) and the Service.
	LabelIncarnation = "dcm.project/incarnation"

	// RecordFinalizer is on a record whose container is gone but whose DELETED has not
	// been delivered yet. The status reporter removes it once DCM has been told.
	RecordFinalizer = "dcm.project/deleted-report-owed"
)

// RecordName is the ConfigMap that holds a container id.
func RecordName(id string) string { return "dcm-container-" + id }

// RecordSelector selects the records (and nothing else of the namespace's ConfigMaps).
const RecordSelector = Selector + "," + LabelRecord + "=" + RecordValue

// Record is what the status reporter needs of a container's record.
type Record struct {
	Name        string
	UID         types.UID
	Incarnation string
	// Owed: the container is gone and DCM has not been told (RecordFinalizer).
	Owed bool
	// Terminating: someone deleted the record (its finalizer may keep it a while).
	Terminating bool
	Created     time.Time
}

// RecordOf reads an object (a ConfigMap) as the record of container id; false when it is not one (an object of someone else
// that happens to have the name). Recognised by name and by the id's labels;
// LabelRecord is not required (a bare reservation with the id's labels counts).
func RecordOf(m metav1.Object, id string) (Record, bool) {
	if isNil(m) || m.GetName() != RecordName(id) || m.GetLabels()[LabelManagedBy] != ManagedByValue || InstanceID(m.GetLabels()) != id {
		return Record{}, false
	}
	return Record{
		Name: m.GetName(), UID: m.GetUID(), Incarnation: m.GetLabels()[LabelIncarnation],
		Owed:        slices.Contains(m.GetFinalizers(), RecordFinalizer),
		Terminating: m.GetDeletionTimestamp() != nil,
		Created:     m.GetCreationTimestamp().Time,
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

// NewRecord is the record of container id, incarnation inc; owed puts RecordFinalizer on.
func NewRecord(id, inc string, owed bool) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName(id), Labels: RecordLabels(id, inc)}}
	if owed {
		c.Finalizers = []string{RecordFinalizer}
	}
	return c
}

// RecordLabels are a record's labels: the system labels (so the informers that select
// containers see records too), the record marker and the incarnation.
func RecordLabels(id, inc string) map[string]string {
	l := SystemLabels(id)
	l[LabelRecord] = RecordValue
	if inc != "" {
		l[LabelIncarnation] = inc
	}
	return l
}

// IncarnationOf is a Kubernetes object's incarnation (see Meta.Incarnation).
func IncarnationOf(m metav1.Object) string { return m.GetLabels()[LabelIncarnation] }

// ForIncarnation returns copies of the objects stamped with incarnation inc: on their
// labels, the pod template's, and the Deployment's and Service's selectors.
func (o Objects) ForIncarnation(inc string) Objects {
	stamp := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		if m == nil {
			m = map[string]string{}
		}
		m[LabelIncarnation] = inc
		return m
	}
	out := Objects{Deployment: o.Deployment.DeepCopy()}
	d := out.Deployment
	d.Labels = stamp(d.Labels)
	d.Spec.Template.Labels = stamp(d.Spec.Template.Labels)
	if d.Spec.Selector != nil {
		d.Spec.Selector.MatchLabels = stamp(d.Spec.Selector.MatchLabels)
	}
	if o.Service != nil {
		out.Service = o.Service.DeepCopy()
		out.Service.Labels = stamp(out.Service.Labels)
		out.Service.Spec.Selector = stamp(out.Service.Spec.Selector)
	}
	return out
}
