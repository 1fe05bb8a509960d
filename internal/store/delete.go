package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// errCreateInProgress answers a DELETE that found a create of its id in progress and
// waited for it as long as it may (createWaitBound): retryAfter is when the create
// counts as abandoned, so the DELETE can clean up whatever it left.
func errCreateInProgress(retryAfter int) error {
	return &Error{Kind: KindConflict, RetryAfter: retryAfter,
		Message: fmt.Sprintf("a create of this container id is in progress; it was not deleted; retry after %d s", retryAfter)}
}

// Delete removes a container: its record is marked DELETED owed, then its Deployment
// (pods follow by cascade) and its Service are deleted at once. Nothing waits for the
// DELETED event: the record remembers it, across restarts and NATS outages, and the
// status reporter delivers it and then deletes the record. It asks the apiserver which
// objects exist rather than the cache, so a container created a moment ago on another
// replica is still found; a create of the id in progress is waited for (planDelete), so
// a DELETE never answers 204 or 404 while a create of its id will still finish. It
// returns once this replica's caches no longer show the container, so a GET that
// follows is a 404.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.explainForbidden(ctx, s.delete(ctx, id))
}

func (s *Store) delete(ctx context.Context, id string) error {
	s.unmarks.supersede(id) // an earlier failed DELETE's mark is this one's to decide on
	snap := s.Snapshot(id)
	r := deleteReads{s: s, id: id, cacheShowsAny: snap.Record != nil || len(snap.Deployments) > 0 || len(snap.Services) > 0}
	began, lookedAgain := s.Clock.Now(), false
	var deadline time.Time // of waiting for a create in progress; zero: not waiting
	retryAfter := 1
	backoff := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: 1 << 30}
	for {
		f, err := r.facts(ctx)
		if err != nil {
			return err
		}
		now := s.Clock.Now()
		d := planDelete(f, now, s.CreateTimeout)
		if d.NotFound {
			// Nothing live: a create that began before this DELETE may still be
			// reserving its id; look again once it must have (Store.ReserveWindow).
			if w := lateCreateWait(began, now, s.ReserveWindow); w > 0 && !lookedAgain {
				lookedAgain = true
				select {
				case <-ctx.Done():
					return classify("waiting for creates that began before the DELETE", ctx.Err())
				case <-time.After(w):
				}
				continue
			}
		}
		if !d.InProgress {
			return s.carryOut(ctx, id, d, r.record)
		}
		if deadline.IsZero() {
			var w time.Duration
			w, retryAfter = createWaitBound(f.Rec.Created, now, s.CreateTimeout)
			deadline = now.Add(w)
			s.log.Info("DELETE waits for a create of its id in progress", "id", id, "until", deadline)
		}
		left := deadline.Sub(now)
		if left <= 0 {
			return errCreateInProgress(retryAfter)
		}
		select {
		case <-ctx.Done():
			return errCreateInProgress(retryAfter)
		case <-time.After(min(backoff.Step(), left)):
		}
	}
}

// deleteReads reads what DELETE decides on, at the apiserver, through the client
// confirmDeleteReads says.
type deleteReads struct {
	s             *Store
	id            string
	cacheShowsAny bool
	found         bool // a read found something of the id: the main client from then on
	// record is the id's record as last read (nil: absent, or not read yet), so the
	// mark can be written over it in one request.
	record *corev1.ConfigMap
}

func (r *deleteReads) client() (kubernetes.Interface, bool) {
	if confirmDeleteReads(r.cacheShowsAny, r.found) {
		return r.s.Confirm, true
	}
	return r.s.client, false
}

// fail is the error of a read: through the Confirm client, the answer of a miss that
// could not be confirmed (its limiter refusal is a 503 of its own); else classified.
func (r *deleteReads) fail(what string, confirm bool, err error) error {
	if confirm {
		return unconfirmed(fmt.Errorf("%s: %w", what, err))
	}
	return classify(what, err)
}

// facts reads the id's Deployments, its Services, then its record (see deleteFacts
// for why in this order). The reads through the Confirm client share ConfirmWait, as a
// GET's do, so a flood of DELETEs of unknown ids is refused fast rather than queued.
func (r *deleteReads) facts(ctx context.Context) (deleteFacts, error) {
	s := r.s
	var f deleteFacts
	sel := metav1.ListOptions{LabelSelector: container.InstanceSelector(r.id)}
	read := func(do func(ctx context.Context, c kubernetes.Interface) error) (bool, error) {
		c, confirm := r.client()
		rctx := ctx
		if confirm {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, ConfirmWait)
			defer cancel()
		}
		return confirm, do(rctx, c)
	}
	confirm, err := read(func(ctx context.Context, c kubernetes.Interface) error {
		deps, err := c.AppsV1().Deployments(s.namespace).List(ctx, sel)
		if err == nil {
			for i := range deps.Items {
				m := &deps.Items[i].ObjectMeta
				f.Deployments = append(f.Deployments, objectOf(m))
			}
		}
		return err
	})
	if err != nil {
		return f, r.fail("listing Deployments", confirm, err)
	}
	slices.SortStableFunc(f.Deployments, func(a, b object) int { return a.Created.Compare(b.Created) })
	r.found = r.found || len(f.Deployments) > 0
	confirm, err = read(func(ctx context.Context, c kubernetes.Interface) error {
		svcs, err := c.CoreV1().Services(s.namespace).List(ctx, sel)
		if err == nil {
			for i := range svcs.Items {
				f.Services = append(f.Services, objectOf(&svcs.Items[i].ObjectMeta))
			}
		}
		return err
	})
	if err != nil {
		return f, r.fail("listing Services", confirm, err)
	}
	r.found = r.found || len(f.Services) > 0
	r.record = nil
	confirm, err = read(func(ctx context.Context, c kubernetes.Interface) error {
		rc, err := c.CoreV1().ConfigMaps(s.namespace).Get(ctx, container.RecordName(r.id), metav1.GetOptions{})
		if err == nil {
			r.record = rc
			f.Record = answered
			f.Rec, f.Ours = container.RecordOf(rc, r.id)
		}
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		f.Record = absent
	case err != nil:
		return f, r.fail("reading the container record", confirm, err)
	default:
		r.found = true
	}
	return f, nil
}

func objectOf(m *metav1.ObjectMeta) object {
	return object{Name: m.Name, UID: m.UID, Incarnation: container.IncarnationOf(m),
		Deleting: m.DeletionTimestamp != nil, Created: m.CreationTimestamp.Time}
}

// carryOut does what planDelete decided: the mark first, then the deletes, each with a
// UID precondition (an object replaced meanwhile is not the one decided on, and is left
// alone), the record last. read is the record as the decision read it (nil: none).
func (s *Store) carryOut(ctx context.Context, id string, d deletion, read *corev1.ConfigMap) error {
	if d.MarkOwed {
		if err := s.markOwed(ctx, id, d.Incarnation, read); err != nil {
			s.unmarkOwed(id, d.Incarnation) // the mark may have been written, its answer lost
			return err
		}
	}
	bg := metav1.DeletePropagationBackground
	opts := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	for _, o := range d.Deployments {
		if err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, o.Name, opts(o.UID)); !gone(err) {
			if d.MarkOwed {
				s.unmarkOwed(id, d.Incarnation)
			}
			return classify("deleting Deployment", err)
		}
	}
	for _, o := range d.Services {
		if err := s.client.CoreV1().Services(s.namespace).Delete(ctx, o.Name, opts(o.UID)); !gone(err) {
			return classify("deleting Service", err)
		}
	}
	if d.NotFound {
		return ErrNotFound
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = waitCached(wctx, func() bool { return s.Snapshot(id).Live() == nil })
	return nil
}

// markOwed writes "DELETED owed" on the container's record (creating it if it was
// deleted by hand), waiting out a record someone is deleting at this moment. read is
// the record as the DELETE read it a moment ago: the mark is written over it in one
// update (its resourceVersion guards it); only when that update is refused (changed or
// deleted since) is the record read again (EnsureRecord).
func (s *Store) markOwed(ctx context.Context, id, inc string, read *corev1.ConfigMap) error {
	if read != nil {
		if done, err := s.markOwedOver(ctx, read, id, inc); done {
			return classify("marking the container deleted", err)
		}
	}
	var err error
	_ = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Steps: 6},
		func(ctx context.Context) (bool, error) {
			err = s.EnsureRecord(ctx, id, inc, true)
			return !errors.Is(err, errRecordBusy), nil
		})
	return classify("marking the container deleted", err)
}

// markOwedOver writes the mark over the record as read; done is false when the
// record has to be read again (it changed or went since, or is being deleted).
func (s *Store) markOwedOver(ctx context.Context, read *corev1.ConfigMap, id, inc string) (done bool, err error) {
	fix := fixRecord(read, id, inc, true)
	if fix.Foreign || fix.Busy {
		return false, nil
	}
	if fix.Write == nil {
		return true, nil // already marked
	}
	_, err = s.client.CoreV1().ConfigMaps(s.namespace).Update(ctx, fix.Write, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil
	}
	return true, err
}
