package store

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Delete removes a container: its Deployment (pods follow by cascade), its Service and
// its id reservation. It asks the apiserver which objects exist rather than the cache, so
// a container created a moment ago on another replica is still found. It returns once
// this replica's caches show the Deployment gone or being deleted, so a GET that follows
// is a 404. The Deployment itself stays (terminating) until the status reporter has
// delivered DELETED and removed the status finalizer.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.explainForbidden(ctx, s.delete(ctx, id))
}

func (s *Store) delete(ctx context.Context, id string) error {
	sel := metav1.ListOptions{LabelSelector: container.InstanceSelector(id)}
	deps, err := s.client.AppsV1().Deployments(s.namespace).List(ctx, sel)
	if err != nil {
		return classify("listing Deployments", err)
	}
	svcs, err := s.client.CoreV1().Services(s.namespace).List(ctx, sel)
	if err != nil {
		return classify("listing Services", err)
	}
	live := 0
	for _, d := range deps.Items {
		if d.DeletionTimestamp == nil {
			live++
		}
	}
	if live == 0 && len(svcs.Items) == 0 {
		return ErrNotFound
	}
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	for _, d := range deps.Items {
		if err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, d.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return classify("deleting Deployment", err)
		}
	}
	for _, svc := range svcs.Items {
		if err := s.client.CoreV1().Services(s.namespace).Delete(ctx, svc.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return classify("deleting Service", err)
		}
	}
	if err := s.releaseReservation(ctx, ReservationName(id), ""); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = waitCached(wctx, func() bool { return s.Snapshot(id).Live == nil })
	return nil
}
