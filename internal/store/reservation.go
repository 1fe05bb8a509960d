package store

import (
	"context"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The id reservation: a Lease named after the container id. Lease creation is atomic in
// the apiserver, so of any number of concurrent creates with one id, across any number
// of provider replicas, exactly one gets it; the others get 409 having created nothing.
//
// Ownership ties a container's objects together so the garbage collector cleans up
// whatever a crash or a failure leaves: the Deployment and the Service are owned by the
// reservation. Releasing the reservation removes the container; the status reporter does
// that after a Deployment deleted by hand has been reported DELETED.
//
// Everything about the reservation, and the status finalizer it works with, is in this
// file.

// ReservationName is the Lease that holds a container id.
func ReservationName(id string) string { return "dcm-container-" + id }

// errTaken answers a create whose id is held by another container.
var errTaken = &Error{Kind: KindConflict, Message: "a container with this id already exists"}

// reserve creates the id's Lease. If one exists, the id is taken, unless the Lease is
// abandoned (see takeOverAllowed). Then it is replaced, guarded by a UID precondition so
// that only one of several concurrent takers succeeds.
func (s *Store) reserve(ctx context.Context, id string) (*coordinationv1.Lease, error) {
	leases := s.client.CoordinationV1().Leases(s.namespace)
	want := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: ReservationName(id),
			Labels: map[string]string{
				container.LabelManagedBy:  container.ManagedByValue,
				container.LabelInstanceID: id,
			},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(id)},
	}
	for attempt := 0; ; attempt++ {
		lease, err := leases.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			return lease, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, classify("reserving id", err)
		}
		if attempt > 0 {
			return nil, errTaken
		}
		existing, err := leases.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // released meanwhile: try once more
		}
		if err != nil {
			return nil, classify("reading reservation", err)
		}
		abandoned, err := s.abandoned(ctx, id, existing)
		if err != nil {
			return nil, err
		}
		if !abandoned {
			return nil, errTaken
		}
		s.log.Warn("taking over an abandoned id reservation", "id", id, "lease", existing.Name,
			"created", existing.CreationTimestamp.Time)
		if err := s.releaseReservation(ctx, existing.Name, existing.UID); err != nil {
			return nil, err
		}
	}
}

// takeOverAllowed is the age rule of an id reservation that has no Deployment: only a
// provider that died mid-create leaves one, and a live create finishes (or rolls back)
// within createTimeout, so one older than twice that is abandoned.
func takeOverAllowed(created, now time.Time, createTimeout time.Duration) bool {
	return now.Sub(created) >= 2*createTimeout
}

// abandoned reports whether an existing reservation may be taken over: old enough, and
// no Deployment carries the id.
func (s *Store) abandoned(ctx context.Context, id string, lease *coordinationv1.Lease) (bool, error) {
	if !takeOverAllowed(lease.CreationTimestamp.Time, s.Clock.Now(), s.CreateTimeout) {
		return false, nil
	}
	// Ask the apiserver, not the cache: this decides whether an id may be reused.
	deps, err := s.client.AppsV1().Deployments(s.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: container.InstanceSelector(id),
	})
	if err != nil {
		return false, classify("checking reservation", err)
	}
	return len(deps.Items) == 0, nil
}

// ownedBy makes an object owned by the reservation.
func ownedBy(lease *coordinationv1.Lease) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: container.ReservationAPIVersion, Kind: container.ReservationKind, Name: lease.Name, UID: lease.UID,
	}}
}

// releaseReservation deletes the reservation (the one with uid, when uid is set); the
// garbage collector then removes what it owns. Already gone or replaced is success.
func (s *Store) releaseReservation(ctx context.Context, name string, uid types.UID) error {
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := s.client.CoordinationV1().Leases(s.namespace).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return classify("releasing reservation", err)
	}
	return nil
}

// ReleaseReservation releases the reservation that owns dep (if it still exists and is
// the same one), and with it, through the garbage collector, the container's Service.
func (s *Store) ReleaseReservation(ctx context.Context, dep *appsv1.Deployment) error {
	if ref, ok := container.ReservationOf(dep); ok {
		return s.releaseReservation(ctx, ref.Name, ref.UID)
	}
	return nil
}

// AddFinalizer puts the status finalizer on a live Deployment (adoption of a container
// made before this provider, or whose finalizer was removed by hand).
func (s *Store) AddFinalizer(ctx context.Context, dep *appsv1.Deployment) error {
	return s.setFinalizer(ctx, dep, true)
}

// RemoveFinalizer takes the status finalizer off a Deployment: after its DELETED was
// delivered, or when a failed create is rolled back (DCM never saw that container).
func (s *Store) RemoveFinalizer(ctx context.Context, dep *appsv1.Deployment) error {
	return s.setFinalizer(ctx, dep, false)
}

func (s *Store) setFinalizer(ctx context.Context, d *appsv1.Deployment, present bool) error {
	if slices.Contains(d.Finalizers, container.Finalizer) == present {
		return nil // as wanted already in the copy the caller decided on
	}
	deps := s.client.AppsV1().Deployments(s.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := deps.Get(ctx, d.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.UID != d.UID || slices.Contains(cur.Finalizers, container.Finalizer) == present {
			return nil
		}
		if present {
			if cur.DeletionTimestamp != nil {
				return nil // too late to adopt
			}
			cur.Finalizers = append(cur.Finalizers, container.Finalizer)
		} else {
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == container.Finalizer })
		}
		_, err = deps.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return classify("updating the status finalizer", err)
}
