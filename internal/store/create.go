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
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/google/uuid"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Create reserves the id (writes its record), then creates the Deployment and the
// Service. Any failure removes what was created (see rollback). It returns once the
// informer caches hold the new objects, so a GET that follows on this replica sees them.
func (s *Store) Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	obs, err := s.create(ctx, id, objs)
	return obs, s.explainForbidden(ctx, err)
}

func (s *Store) create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	ctx, cancel := context.WithTimeout(ctx, s.CreateTimeout)
	defer cancel()

	// Every container gets its own incarnation, so its Service and reads never select
	// the pods of an earlier container with the same id that is still terminating.
	inc := uuid.NewString()
	record, err := s.reserve(ctx, id, inc)
	if err != nil {
		return container.Observed{}, err
	}
	// Is the id free of a workload too? (see buildAfterReserving)
	cachedLive := s.Snapshot(id).Live() != nil
	next := buildAfterReserving(cachedLive, false, false)
	if next == buildAskAPIServer {
		live, err := s.liveAtAPIServer(ctx, s.client, id)
		if err != nil {
			s.rollback(id, record, nil, nil)
			return container.Observed{}, err
		}
		next = buildAfterReserving(cachedLive, true, live)
	}
	if next == buildTaken {
		s.rollback(id, record, nil, nil)
		return container.Observed{}, errTaken
	}

	// Nothing is owned by anything, so both objects are created at once: a create costs
	// the record plus the slower of the two, not their sum.
	objs = objs.ForIncarnation(inc)
	dep := objs.Deployment
	dep.Namespace = s.namespace
	svc := objs.Service
	if svc != nil {
		svc.Namespace = s.namespace
	}
	var out container.Objects
	var depErr, svcErr error
	var wg sync.WaitGroup
	if svc != nil {
		wg.Go(func() {
			out.Service, svcErr = s.client.CoreV1().Services(s.namespace).Create(ctx, svc, metav1.CreateOptions{})
			if svcErr != nil {
				out.Service = nil // client-go answers an empty object with an error
			}
		})
	}
	out.Deployment, depErr = s.client.AppsV1().Deployments(s.namespace).Create(ctx, dep, metav1.CreateOptions{})
	if depErr != nil {
		out.Deployment = nil
	}
	wg.Wait()
	if depErr != nil || svcErr != nil {
		s.rollback(id, record, out.Deployment, out.Service)
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
	return out.Observed(), nil
}

// rollback deletes what a failed create made, detached from the request's context (a
// client that hung up must not leave objects behind), retrying for a while. The record
// goes last, and only once the workload is gone: should the apiserver refuse for longer,
// the container stays a known one (readable, reported, deletable) rather than an orphan.
func (s *Store) rollback(id string, record *coordinationv1.Lease, dep *appsv1.Deployment, svc *corev1.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), s.CreateTimeout)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	opts := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 8, Cap: 2 * time.Second},
		func(ctx context.Context) (bool, error) {
			if dep != nil {
				if err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, dep.Name, opts(dep.UID)); !gone(err) {
					s.log.Warn("rollback: deleting Deployment", "id", id, "err", err)
					return false, nil
				}
				dep = nil
			}
			if svc != nil {
				if err := s.client.CoreV1().Services(s.namespace).Delete(ctx, svc.Name, opts(svc.UID)); !gone(err) {
					s.log.Warn("rollback: deleting Service", "id", id, "err", err)
					return false, nil
				}
				svc = nil
			}
			if err := s.deleteLease(ctx, record.Name, record.UID); err != nil {
				s.log.Warn("rollback: deleting the record", "id", id, "err", err)
				return false, nil
			}
			return true, nil
		})
	if err != nil {
		s.log.Error("rollback incomplete: the container stays known and can be deleted", "id", id, "err", err)
	}
}
