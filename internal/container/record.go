package container

import (
	"maps"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Every container has a record: a Lease named after its id (RecordName). Creating it is
// how an id is reserved (Lease creation is atomic in the apiserver, so of any number of
// concurrent creates with one id, across replicas, exactly one succeeds), and it outlives
// the container's workload for as long as DCM is still owed the container's DELETED.
//
// Nothing is owned by the record and the record is owned by nothing: deleting records by
// hand (a common clean-up of Leases) never touches a workload, and deleting a workload
// (DELETE, kubectl) removes it at once, as Kubernetes users expect. A record deleted by
// hand is restored from the live Deployment; a record whose DELETED is owed carries
// RecordFinalizer, so even a deleted record is kept until DCM has been told.
const (
	// LabelRecord marks a Lease as a container record, for people and tools listing
	// Leases. RecordOf does not require it: a record is recognised by its name and the
	// id's labels (managed-by, instance id) before it is relabelled or deleted.
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

// RecordName is the Lease that holds a container id.
func RecordName(id string) string { return "dcm-container-" + id }

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

// RecordOf reads a Lease as the record of container id; false when it is not one (a
// Lease of someone else that happens to have the name). Recognised by name and by the
// id's labels; LabelRecord is not required (a bare reservation with the id's labels counts).
func RecordOf(l *coordinationv1.Lease, id string) (Record, bool) {
	if l == nil || l.Name != RecordName(id) || l.Labels[LabelManagedBy] != ManagedByValue || InstanceID(l.Labels) != id {
		return Record{}, false
	}
	return Record{
		Name: l.Name, UID: l.UID, Incarnation: l.Labels[LabelIncarnation],
		Owed:        slices.Contains(l.Finalizers, RecordFinalizer),
		Terminating: l.DeletionTimestamp != nil,
		Created:     l.CreationTimestamp.Time,
	}, true
}

// NewRecord is the record of container id, incarnation inc; owed puts RecordFinalizer on.
func NewRecord(id, inc string, owed bool) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: RecordName(id), Labels: RecordLabels(id, inc)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id},
	}
	if owed {
		l.Finalizers = []string{RecordFinalizer}
	}
	return l
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
