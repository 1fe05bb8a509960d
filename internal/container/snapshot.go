package container

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Snapshot is everything known about one container id at one moment: what its status
// and its API resource are computed from, and what the status reporter decides on.
type Snapshot struct {
	// Record is the id's record; nil when there is none (deleted by hand, or a container
	// made before records).
	Record *Record
	// Deployments with this id, oldest first, including ones being deleted.
	Deployments []*appsv1.Deployment
	Pods        []*corev1.Pod
	Services    []*corev1.Service
}

// Live is the container's Deployment: the oldest one not being deleted; nil when the
// container is gone. One per id is the invariant; should there ever be more, the oldest
// is the container and the answer stays stable.
func (s Snapshot) Live() *appsv1.Deployment {
	for _, d := range s.Deployments {
		if d.DeletionTimestamp == nil {
			return d
		}
	}
	return nil
}

// LivePods are the pods of the live Deployment's incarnation: a pod of an earlier
// container with the same id, still terminating, never speaks for this one.
func (s Snapshot) LivePods() []*corev1.Pod {
	live := s.Live()
	if live == nil {
		return nil
	}
	return sameIncarnation(IncarnationOf(live), s.Pods)
}

// LiveService is the live container's Service, if it has one.
func (s Snapshot) LiveService() *corev1.Service {
	live := s.Live()
	if live == nil {
		return nil
	}
	if svcs := sameIncarnation(IncarnationOf(live), s.Services); len(svcs) > 0 {
		return svcs[0]
	}
	return nil
}

// Status is the container's status as this snapshot shows it (see StatusOf).
func (s Snapshot) Status() Status { return StatusOf(s.Live(), s.LivePods()) }

// Empty reports whether nothing of the id is left in the cluster.
func (s Snapshot) Empty() bool {
	return s.Record == nil && len(s.Deployments) == 0 && len(s.Pods) == 0 && len(s.Services) == 0
}

// sameIncarnation keeps the objects of incarnation inc ("" keeps all: a container made
// before incarnations selects every pod of its id).
func sameIncarnation[T interface{ GetLabels() map[string]string }](inc string, objs []T) []T {
	if inc == "" {
		return objs
	}
	var out []T
	for _, o := range objs {
		if o.GetLabels()[LabelIncarnation] == inc {
			out = append(out, o)
		}
	}
	return out
}
