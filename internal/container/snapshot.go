package container

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Snapshot is everything known about one container id at one moment: what the status
// of the container is computed from, and what the status reporter decides on.
type Snapshot struct {
	// Live is the container's Deployment; nil when it is gone or being deleted. One
	// Deployment per id is the invariant; should there ever be more, the oldest is the
	// container and the answer stays stable.
	Live *appsv1.Deployment
	// Deleting are Deployments with this id that are being deleted.
	Deleting []*appsv1.Deployment
	Pods     []*corev1.Pod
}

// Status is the container's status as this snapshot shows it (see StatusOf).
func (s Snapshot) Status() Status {
	dep := s.Live
	if dep == nil && len(s.Deleting) > 0 {
		dep = s.Deleting[0]
	}
	return StatusOf(dep, s.Pods)
}

// Gone reports whether nothing of the container is left in the cluster.
func (s Snapshot) Gone() bool { return s.Live == nil && len(s.Deleting) == 0 && len(s.Pods) == 0 }
