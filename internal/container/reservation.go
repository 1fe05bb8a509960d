package container

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A container's Deployment and Service are owned by its id reservation, a Lease (see
// internal/store/reservation.go). These name that tie, so the store that makes it and
// the status plan that decides to release it agree on what it is.
const (
	ReservationAPIVersion = "coordination.k8s.io/v1"
	ReservationKind       = "Lease"
)

// ReservationOf is the id reservation that owns d, if any.
func ReservationOf(d *appsv1.Deployment) (metav1.OwnerReference, bool) {
	for _, ref := range d.OwnerReferences {
		if ref.Kind == ReservationKind && ref.APIVersion == ReservationAPIVersion {
			return ref, true
		}
	}
	return metav1.OwnerReference{}, false
}
