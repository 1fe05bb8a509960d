package store

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Delete removes a container: its record is marked DELETED owed, then its Deployment
// (pods follow by cascade) and its Service are deleted at once. Nothing waits for the
// DELETED event: the record remembers it, across restarts and NATS outages, and the
// status reporter delivers it and then deletes the record. It asks the apiserver which
// objects exist rather than the cache, so a container created a moment ago on another
// replica is still found, and returns once this replica's caches no longer show the
// container, so a GET that follows is a 404.
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
	svcNames := make([]string, len(svcs.Items))
	for i := range svcs.Items {
		svcNames[i] = svcs.Items[i].Name
	}
	d := planDelete(container.DeploymentsOf(deps.Items), svcNames)
	if d.NotFound {
		return ErrNotFound
	}
	if d.MarkOwed {
		if err := s.markOwed(ctx, id, d.Incarnation); err != nil {
			return err
		}
	}
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	for _, name := range d.Deployments {
		if err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
			return classify("deleting Deployment", err)
		}
	}
	for _, name := range d.Services {
		if err := s.client.CoreV1().Services(s.namespace).Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
			return classify("deleting Service", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = waitCached(wctx, func() bool { return s.Snapshot(id).Live() == nil })
	return nil
}

// markOwed writes "DELETED owed" on the container's record (creating it if it was
// deleted by hand), waiting out a record someone is deleting at this moment.
func (s *Store) markOwed(ctx context.Context, id, inc string) error {
	var err error
	_ = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Steps: 6},
		func(ctx context.Context) (bool, error) {
			err = s.EnsureRecord(ctx, id, inc, true)
			return !errors.Is(err, errRecordBusy), nil
		})
	return classify("marking the container deleted", err)
}
