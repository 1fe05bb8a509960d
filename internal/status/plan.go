package status

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Plan is what the reporter does for one container, decided from its snapshot alone.
// The reporter carries it out in this order: publish, adopt, release; a failed step
// stops the rest and the whole container is planned again on the retry.
type Plan struct {
	// Publish is the status to deliver; nil when DCM already has it.
	Publish *container.Status
	// Adopt is a live Deployment without the status finalizer (made before this
	// provider, or the finalizer was removed by hand): it gets one, so its deletion will
	// be reported too.
	Adopt *appsv1.Deployment
	// Unhold are Deployments being deleted whose DELETED is delivered (by this plan's
	// Publish or before): their status finalizer comes off, so the garbage collector
	// can finish them.
	Unhold []*appsv1.Deployment
	// Release are Deployments being deleted that are owned by an id reservation: the
	// container is gone, so its reservation (and with it its Service) is released.
	Release []*appsv1.Deployment
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool {
	return p.Publish == nil && p.Adopt == nil && len(p.Unhold) == 0 && len(p.Release) == 0
}

// plan decides what to do for a container: snap is what the caches show now, last the
// status DCM was last given (nil: none, as far as this reporter knows), forced asks for
// the status to be sent even if unchanged (republish after sync, reconnect, resync).
func plan(snap container.Snapshot, last *container.Status, forced bool) Plan {
	var p Plan
	st := snap.Status()
	if forced || last == nil || *last != st {
		p.Publish = &st
	}
	if snap.Live != nil && !hasFinalizer(snap.Live) {
		p.Adopt = snap.Live
	}
	// Finalizers come off only once the container is DELETED: a Deployment being
	// deleted while a newer one with the same id lives stays held until that one is
	// gone too, so DCM is never told DELETED for an id that still runs.
	if st.Status != v1alpha1.DELETED {
		return p
	}
	for _, d := range snap.Deleting {
		if hasFinalizer(d) {
			p.Unhold = append(p.Unhold, d)
		}
		if _, ok := container.ReservationOf(d); ok {
			p.Release = append(p.Release, d)
		}
	}
	return p
}

func hasFinalizer(d *appsv1.Deployment) bool {
	return slices.Contains(d.Finalizers, container.Finalizer)
}
