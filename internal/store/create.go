package store

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/google/uuid"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Create reserves the id (writes its record), then creates the Service and, last, the
// Deployment. Any failure removes what was created (see rollback). It returns once the
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
	began := s.Clock.Now()
	record, err := s.reserve(ctx, id, inc)
	if err != nil {
		return container.Observed{}, err
	}
	if !reservedInTime(began, s.Clock.Now(), s.ReserveWindow) {
		s.rollback(id, inc, record, false)
		return container.Observed{}, errReservedLate(s.ReserveWindow)
	}
	// Is the id free of a workload too? (see buildAfterReserving: one label-selected
	// LIST at the apiserver per create.)
	next := buildAfterReserving(false, false)
	if next == buildAskAPIServer {
		live, err := s.liveAtAPIServer(ctx, s.client, id)
		if err != nil {
			s.rollback(id, inc, record, false)
			return container.Observed{}, err
		}
		next = buildAfterReserving(true, live)
	}
	if next == buildTaken {
		s.rollback(id, inc, record, false)
		return container.Observed{}, errTaken
	}

	// The Service first, the Deployment last: the Deployment is the create's commit
	// point. Once it exists the create makes nothing more, so a DELETE that finds a live
	// Deployment deletes the whole container, and one that finds the record without a
	// Deployment knows a create is still in progress and waits for it (planDelete). Made
	// in parallel, a Service could come after a DELETE that had deleted the Deployment.
	// It costs one Service create of latency.
	objs = objs.ForIncarnation(inc)
	dep := objs.Deployment
	dep.Namespace = s.namespace
	svc := objs.Service
	var out container.Objects
	if svc != nil {
		svc.Namespace = s.namespace
		if out.Service, err = s.client.CoreV1().Services(s.namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			s.rollback(id, inc, record, true)
			return container.Observed{}, classify("creating Service", err)
		}
	}
	if out.Deployment, err = s.client.AppsV1().Deployments(s.namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		s.rollback(id, inc, record, true)
		return container.Observed{}, classify("creating Deployment", err)
	}
	created := out.Deployment
	// Read-your-writes on this replica: bounded, and harmless if it times out (the
	// objects exist; the cache is only late). It ends too once a DELETE has marked this
	// container's record (deletingNow): waiting for objects a DELETE is removing would
	// answer the 201 seconds late, after the DELETE's 204 and its DELETED, and after
	// a create of the id that came next (the chaos run, seed 2303).
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	_ = waitCached(wctx, func() bool {
		return s.holds(id, deploymentKind, created.Name) &&
			(out.Service == nil || s.holds(id, serviceKind, out.Service.Name)) ||
			s.deletingNow(id, record.UID)
	})
	return out.Observed(), nil
}

// errReservedLate answers a create that did not have its id reserved within the
// reservation window (Store.ReserveWindow): the Kubernetes API was slow, and a DELETE
// of the id may have answered 404 meanwhile; nothing was created.
func errReservedLate(window time.Duration) error {
	return &Error{Kind: KindUnavailable, RetryAfter: 1,
		Message: fmt.Sprintf("reserving the container id took longer than %s (the Kubernetes API is slow); nothing was created; retry", window)}
}

// rollback deletes what a failed create made, detached from the request's context (a
// client that hung up must not leave objects behind), retrying for a while. What it
// made is found at the apiserver by its incarnation (made: a create of an object was
// sent), not taken from the answers: an answer lost on the way back (a timeout, a
// broken connection) leaves an object the apiserver committed and the create never
// heard of, and the names come from generateName. Each delete has a UID precondition.
// The record goes last, and only once the workload is gone: should the apiserver
// refuse for longer, the container stays a known one (readable, reported, deletable)
// rather than an orphan.
func (s *Store) rollback(id, inc string, record *corev1.ConfigMap, made bool) {
	ctx, cancel := context.WithTimeout(context.Background(), s.CreateTimeout)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	opts := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	sel := metav1.ListOptions{LabelSelector: incarnationSelector(id, inc)}
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 8, Cap: 2 * time.Second},
		func(ctx context.Context) (bool, error) {
			if made {
				deps, err := s.client.AppsV1().Deployments(s.namespace).List(ctx, sel)
				if err != nil {
					s.log.Warn("rollback: listing Deployments", "id", id, "err", err)
					return false, nil
				}
				for _, d := range deps.Items {
					if err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, d.Name, opts(d.UID)); !gone(err) {
						s.log.Warn("rollback: deleting Deployment", "id", id, "err", err)
						return false, nil
					}
				}
				svcs, err := s.client.CoreV1().Services(s.namespace).List(ctx, sel)
				if err != nil {
					s.log.Warn("rollback: listing Services", "id", id, "err", err)
					return false, nil
				}
				for _, v := range svcs.Items {
					if err := s.client.CoreV1().Services(s.namespace).Delete(ctx, v.Name, opts(v.UID)); !gone(err) {
						s.log.Warn("rollback: deleting Service", "id", id, "err", err)
						return false, nil
					}
				}
				made = false
			}
			if err := s.deleteRecordObject(ctx, record.Name, record.UID); err != nil {
				s.log.Warn("rollback: deleting the record", "id", id, "err", err)
				return false, nil
			}
			return true, nil
		})
	if err != nil {
		s.log.Error("rollback incomplete: the container stays known and can be deleted", "id", id, "err", err)
	}
}

// incarnationSelector selects the objects of one incarnation of container id.
func incarnationSelector(id, inc string) string {
	return k8slabels.SelectorFromSet(labels(id, inc)).String()
}

// deletingNow reports whether this replica's cache shows the record uid of container id
// marked DELETED owed, or being deleted: a DELETE has taken the container.
func (s *Store) deletingNow(id string, uid types.UID) bool {
	obj, ok, _ := s.records.GetStore().GetByKey(s.namespace + "/" + container.RecordName(id))
	if !ok {
		return false
	}
	rec, ok := recordOf(obj, id)
	return ok && rec.UID == uid && (rec.Owed || rec.Terminating)
}
