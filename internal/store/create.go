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
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Create reserves the id, then creates the Deployment and the Service. Any failure
// removes what was created (see rollback). It returns once the informer caches hold the
// new objects, so a GET that follows on this replica sees them.
func (s *Store) Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	obs, err := s.create(ctx, id, objs)
	return obs, s.explainForbidden(ctx, err)
}

func (s *Store) create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
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
		return container.Observed{}, errTaken
	}

	// Both objects are owned by the reservation, so they can be created at once: a
	// create costs the reservation plus the slower of the two, not their sum.
	owner := ownedBy(lease)
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

// rollback deletes what a failed create made. It runs detached from the request's
// context (a client that hung up must not leave objects behind). The reservation goes
// first: the garbage collector then removes the Deployment and the Service even if the
// explicit deletes below fail.
func (s *Store) rollback(id string, lease *coordinationv1.Lease, dep *appsv1.Deployment, svc *corev1.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.releaseReservation(ctx, lease.Name, lease.UID); err != nil {
		s.log.Error("rollback: deleting reservation", "id", id, "err", err)
	}
	bg := metav1.DeletePropagationBackground
	opts := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	if dep != nil {
		// DCM never saw this container, so there is no DELETED to report: drop the
		// status finalizer, or the Deployment would wait for the status reporter.
		if err := s.RemoveFinalizer(ctx, dep); err != nil {
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
