package container

// Two views of what the cluster holds, for two readers:
//
//   - Observed is one live container: the API's resource (ToAPI) is made from it. GET
//     and LIST answer only containers that have one.
//   - Snapshot is everything the cluster holds under one container id, live or not: the
//     record, every Deployment (ones being deleted too), every pod and Service of any
//     incarnation. The status controller decides from it, since it must also act when no
//     container lives (a DELETED owed). Its Observed is the container it shows live, if
//     any.

// Observed is one live container as the cluster shows it: its Deployment, and the pods
// and Service of that Deployment's incarnation.
type Observed struct {
	Deployment *Deployment
	Service    *Service // nil when none
	Pods       []*Pod
}

// Snapshot is everything the cluster holds under one container id at one moment: what
// the status controller decides on.
type Snapshot struct {
	// Record is the id's record; nil when there is none.
	Record *Record
	// Deployments with this id, oldest first, including ones being deleted.
	Deployments []*Deployment
	// Pods and Services with this id, of any incarnation.
	Pods     []*Pod
	Services []*Service
}

// Live is the container's Deployment: the one its record controls, not being deleted,
// under a record not being deleted; nil when the container is gone, or not made yet.
// A Deployment of the id that no live record controls is not a container: one of an
// earlier incarnation that the garbage collector is deleting, or someone else's.
// Should a record ever control more than one, the oldest is the container and the
// answer stays stable.
func (s Snapshot) Live() *Deployment {
	if s.Record == nil || s.Record.Terminating {
		return nil
	}
	for _, d := range s.Deployments {
		if !d.Deleting && d.Incarnation == string(s.Record.UID) {
			return d
		}
	}
	return nil
}

// Observed is the live container; false when there is none. Only the pods and Service
// of the live Deployment's incarnation are its own: those of an earlier container with
// the same id, still terminating, never speak for it.
func (s Snapshot) Observed() (Observed, bool) {
	live := s.Live()
	if live == nil {
		return Observed{}, false
	}
	o := Observed{Deployment: live, Pods: sameIncarnation(live.Incarnation, s.Pods)}
	if svcs := sameIncarnation(live.Incarnation, s.Services); len(svcs) > 0 {
		o.Service = svcs[0]
	}
	return o, true
}

// Status is the container's status as this snapshot shows it (see StatusOf): DELETED
// when no container lives.
func (s Snapshot) Status() Status {
	o, _ := s.Observed()
	return StatusOf(o.Deployment, o.Pods)
}

// Withheld is what Status keeps out of the status message, for the log (see Withheld).
func (s Snapshot) Withheld() string {
	o, _ := s.Observed()
	return Withheld(o.Deployment, o.Pods)
}

// ServicesOf are the snapshot's Services of incarnation inc.
func (s Snapshot) ServicesOf(inc string) []*Service { return sameIncarnation(inc, s.Services) }

// Empty reports whether nothing of the id is left in the cluster.
func (s Snapshot) Empty() bool {
	return s.Record == nil && len(s.Deployments) == 0 && len(s.Pods) == 0 && len(s.Services) == 0
}

// sameIncarnation keeps the objects of incarnation inc.
func sameIncarnation[T interface{ incarnation() string }](inc string, objs []T) []T {
	var out []T
	for _, o := range objs {
		if o.incarnation() == inc {
			out = append(out, o)
		}
	}
	return out
}

func (m *Meta) incarnation() string { return m.Incarnation }
