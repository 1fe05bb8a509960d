package store

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// ReservationName is the Lease that holds a container id. Lease creation is atomic in
// the apiserver, so of any number of concurrent creates with one id, across any number
// of provider replicas, exactly one gets it; the others get 409 having created nothing.
func ReservationName(id string) string { return "dcm-container-" + id }

// Ownership ties the objects together so the garbage collector cleans up whatever a
// crash or a failure leaves: the Deployment and the Service are owned by the
// reservation. Deleting the reservation removes the container; the status reporter does
// that after a Deployment deleted by hand has been reported DELETED.

// Create reserves the id, then creates the Deployment and the Service. Any failure
// removes what was created (see rollback). It returns once the informer caches hold the
// new objects, so a GET that follows on this replica sees them.
func (s *Store) Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	ctx, cancel := context.WithTimeout(ctx, s.CreateTimeout)
	defer cancel()

	lease, err := s.reserve(ctx, id)
	if err != nil {
		return container.Observed{}, err
	}
	// Containers made before this provider (e.g. by the reference provider) have no
	// reservation: the cache still knows their Deployment.
	if s.Snapshot(id).Live != nil {
		s.rollback(id, lease, nil, nil)
		return container.Observed{}, &Error{Kind: KindConflict, Message: "a container with this id already exists"}
	}

	// Both objects are owned by the reservation, so they can be created at once: a
	// create costs the reservation plus the slower of the two, not their sum.
	owner := []metav1.OwnerReference{{
		APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: lease.Name, UID: lease.UID,
	}}
	dep := objs.Deployment.DeepCopy()
	dep.Namespace, dep.OwnerReferences = s.namespace, owner
	var svc *corev1.Service
	if objs.Service != nil {
		svc = objs.Service.DeepCopy()
		svc.Namespace, svc.OwnerReferences = s.namespace, owner
	}
	var out container.Observed
	var depErr, svcErr error
	var wg sync.WaitGroup
	if svc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Service, svcErr = s.client.CoreV1().Services(s.namespace).Create(ctx, svc, metav1.CreateOptions{})
		}()
	}
	out.Deployment, depErr = s.client.AppsV1().Deployments(s.namespace).Create(ctx, dep, metav1.CreateOptions{})
	wg.Wait()
	if depErr != nil || svcErr != nil {
		s.rollback(id, lease, out.Deployment, out.Service)
		if depErr != nil {
			return container.Observed{}, classify("creating Deployment", depErr)
		}
		return container.Observed{}, classify("creating Service", svcErr)
	}
	created := out.Deployment
	// Read-your-writes on this replica: bounded, and harmless if it times out (the
	// objects exist; the cache is only late).
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	_ = waitCached(wctx, func() bool {
		return cached(s.deployments, s.namespace+"/"+created.Name) && s.ids.contains(id) &&
			(out.Service == nil || cached(s.services, s.namespace+"/"+out.Service.Name))
	})
	return out, nil
}

// reserve creates the id's Lease. If one exists, the id is taken, unless the Lease is
// abandoned: no Deployment carries the id and the Lease is older than a create can take,
// which only happens when a provider died mid-create. Then it is replaced, guarded by a
// UID precondition so that only one of several concurrent takers succeeds.
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
		if !apierrors.IsAlreadyExists(err) || attempt > 0 {
			if apierrors.IsAlreadyExists(err) {
				return nil, &Error{Kind: KindConflict, Message: "a container with this id already exists"}
			}
			return nil, classify("reserving id", err)
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
			return nil, &Error{Kind: KindConflict, Message: "a container with this id already exists"}
		}
		s.log.Warn("taking over an abandoned id reservation", "id", id, "lease", existing.Name,
			"created", existing.CreationTimestamp.Time)
		err = leases.Delete(ctx, existing.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &existing.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, classify("releasing abandoned reservation", err)
		}
	}
}

func (s *Store) abandoned(ctx context.Context, id string, lease *coordinationv1.Lease) (bool, error) {
	if time.Since(lease.CreationTimestamp.Time) < 2*s.CreateTimeout {
		return false, nil
	}
	// Ask the apiserver, not the cache: this decides whether an id may be reused.
	deps, err := s.client.AppsV1().Deployments(s.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{container.LabelInstanceID: id}).String(),
	})
	if err != nil {
		return false, classify("checking reservation", err)
	}
	return len(deps.Items) == 0, nil
}

// rollback deletes what a failed create made. It runs detached from the request's
// context (a client that hung up must not leave objects behind). The reservation goes
// first: the garbage collector then removes the Deployment and the Service even if the
// explicit deletes below fail.
func (s *Store) rollback(id string, lease *coordinationv1.Lease, dep *appsv1.Deployment, svc *corev1.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	opts := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	if err := s.client.CoordinationV1().Leases(s.namespace).Delete(ctx, lease.Name, opts(lease.UID)); err != nil && !apierrors.IsNotFound(err) {
		s.log.Error("rollback: deleting reservation", "id", id, "err", err)
	}
	if dep != nil {
		// DCM never saw this container, so there is no DELETED to report: drop the
		// status finalizer, or the Deployment would wait for the status reporter.
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := s.client.AppsV1().Deployments(s.namespace).Patch(ctx, dep.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.log.Error("rollback: removing the status finalizer", "id", id, "err", err)
		}
		if err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, dep.Name, opts(dep.UID)); err != nil && !apierrors.IsNotFound(err) {
			s.log.Error("rollback: deleting Deployment (the garbage collector will finish it)", "id", id, "err", err)
		}
	}
	if svc != nil {
		if err := s.client.CoreV1().Services(s.namespace).Delete(ctx, svc.Name, opts(svc.UID)); err != nil && !apierrors.IsNotFound(err) {
			s.log.Error("rollback: deleting Service (the garbage collector will finish it)", "id", id, "err", err)
		}
	}
}

// ReleaseReservation deletes the id reservation that owns dep (if it still exists and is
// the same one), and with it, through the garbage collector, the container's Service.
func (s *Store) ReleaseReservation(ctx context.Context, dep *appsv1.Deployment) error {
	for _, ref := range dep.OwnerReferences {
		if ref.Kind != "Lease" || ref.APIVersion != "coordination.k8s.io/v1" {
			continue
		}
		bg := metav1.DeletePropagationBackground
		err := s.client.CoordinationV1().Leases(s.namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
			PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &ref.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return classify("releasing reservation", err)
		}
	}
	return nil
}
