package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The container record (see internal/container/record.go for what it is and why nothing
// is owned by it): reserving an id, restoring a record deleted by hand, marking DELETED
// owed, deleting it once delivered, and deleting every record for the uninstall.
// Every request that writes a record is made in this file (create.go's rollback and
// release.go call it); what to write is decided in decide.go.

// errTaken answers a create whose id is held by another container.
var errTaken = &Error{Kind: KindConflict, Message: "a container with this id already exists"}

// errRecordBusy: the record is being deleted by someone; the caller retries shortly
// (a client that gets it too is told when).
var errRecordBusy = &Error{Kind: KindUnavailable, RetryAfter: 2,
	Message: "the container's record is being deleted by someone; retry after 2 s"}

// errPreviousDeleting answers a create whose id's previous container is deleted but its
// DELETED not delivered yet (its record owes it, or is an old one without a Deployment:
// see claimID). The status reporter delivers it within seconds while NATS is up.
var errPreviousDeleting = &Error{Kind: KindConflict, RetryAfter: 5,
	Message: "the previous container with this id is still being deleted (its DELETED event is not delivered yet); retry after 5 s"}

// reserve creates the id's record for incarnation inc. If one exists, claimID decides:
// the id is taken, or the record is abandoned and replaced.
func (s *Store) reserve(ctx context.Context, id, inc string) (*corev1.ConfigMap, error) {
	records := s.client.CoreV1().ConfigMaps(s.namespace)
	want := container.NewRecord(id, inc, false)
create:
	for retried := false; ; retried = true {
		record, err := records.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			return record, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, classify("reserving id", err)
		}
		h := holder{Retried: retried}
		var existing *corev1.ConfigMap
		pause := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: 500 * time.Millisecond, Steps: claimWaits}
		for {
			switch claimID(h, s.Clock.Now(), s.CreateTimeout) {
			case claimWaitDeleted:
				select {
				case <-ctx.Done():
					return nil, errRecordBusy
				case <-time.After(pause.Step()):
				}
				h.Waited++
				h.Held = notAsked
			case claimBusy:
				return nil, errRecordBusy
			case claimPreviousDeleting:
				return nil, errPreviousDeleting
			case claimRead:
				existing, err = records.Get(ctx, want.Name, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
					h.Held = absent
				case err != nil:
					return nil, classify("reading reservation", err)
				default:
					h.Held = answered
					h.Record, h.Ours = container.RecordOf(existing, id)
				}
			case claimListDeployments:
				deps, err := s.client.AppsV1().Deployments(s.namespace).List(ctx, metav1.ListOptions{
					LabelSelector: container.InstanceSelector(id),
				})
				if err != nil {
					return nil, classify("checking reservation", err)
				}
				h.Listed, h.Deployments = true, len(deps.Items)
			case claimTaken:
				return nil, errTaken
			case claimRetry:
				continue create // the record went meanwhile: try once more
			}
		}
	}
}

// deleteRecordObject deletes the record name if it still has uid (any, when uid is
// empty): a newer record of the id is never touched. Gone or replaced meanwhile is
// success. Its finalizer, if any, stays (see DeleteRecord).
func (s *Store) deleteRecordObject(ctx context.Context, name string, uid types.UID) error {
	return classify("deleting the container record", deleteRecordOf(ctx, s.client, s.namespace, name, uid))
}

// deleteRecordOf is deleteRecordObject for callers without a Store (the uninstall), its
// error unclassified.
func deleteRecordOf(ctx context.Context, client kubernetes.Interface, ns, name string, uid types.UID) error {
	var opts metav1.DeleteOptions
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := client.CoreV1().ConfigMaps(ns).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// liveAtAPIServer asks the apiserver, not the cache, whether id has a live Deployment.
// The caches can be behind by as long as a broken watch takes to come back: client-go's
// reflector waits up to 30-60 s between attempts after an apiserver outage. Decisions a
// stale cache must not make (a 404, a 409, a DELETED) ask here instead.
func (s *Store) liveAtAPIServer(ctx context.Context, client kubernetes.Interface, id string) (bool, error) {
	deps, err := client.AppsV1().Deployments(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: container.InstanceSelector(id)})
	if err != nil {
		return false, classify("listing Deployments", err)
	}
	return container.Snapshot{Deployments: container.DeploymentsOf(deps.Items)}.Live() != nil, nil
}

// EnsureRecord makes the record of container id say incarnation inc, and, when owed,
// hold DELETED owed (RecordFinalizer). A missing record is created: restored from the
// live Deployment, or written for a container deleted without one. One that exists is
// brought to that (fixRecord decides how): a record being deleted by hand is let go
// and errRecordBusy asks for a retry, which then creates it afresh; a ConfigMap with the
// record's name that is not a record is never touched.
func (s *Store) EnsureRecord(ctx context.Context, id, inc string, owed bool) error {
	records := s.client.CoreV1().ConfigMaps(s.namespace)
	for attempt := 1; ; attempt++ {
		_, err := records.Create(ctx, container.NewRecord(id, inc, owed), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return classify("writing the container record", err)
		}
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := records.Get(ctx, container.RecordName(id), metav1.GetOptions{})
			if err != nil {
				return err
			}
			fix := fixRecord(cur, id, inc, owed)
			if fix.Foreign {
				return fmt.Errorf("the ConfigMap %s/%s is not the record of container %q (labels %v); rename or remove it",
					s.namespace, cur.Name, id, cur.Labels)
			}
			if fix.Write != nil {
				if _, err := records.Update(ctx, fix.Write, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			if fix.Busy {
				return errRecordBusy
			}
			return nil
		})
		// Deleted between the create and the read (see recreateRecord): create it again,
		// or a DELETE marking it owed would answer 500.
		if apierrors.IsNotFound(err) && recreateRecord(attempt) {
			continue
		}
		return classify("writing the container record", err)
	}
}

// DeleteRecord deletes a record once its container's DELETED has been delivered: the
// delete first (UID precondition: a newer record of the id is never touched), then
// RecordFinalizer off, so the record goes. (Not "release": that is the uninstall
// command's word, see Release.)
func (s *Store) DeleteRecord(ctx context.Context, rec container.Record) error {
	if err := s.deleteRecordObject(ctx, rec.Name, rec.UID); err != nil {
		return err
	}
	records := s.client.CoreV1().ConfigMaps(s.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := records.Get(ctx, rec.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.UID != rec.UID || !slices.Contains(cur.Finalizers, container.RecordFinalizer) {
			return nil
		}
		cur.Finalizers = withoutRecordFinalizer(cur.Finalizers)
		_, err = records.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return classify("deleting the container record", err)
}

// deleteRecordAnyway deletes a record whether or not its DELETED was delivered (the
// uninstall, Release): RecordFinalizer off, then the delete with a UID precondition.
// Whether there is a finalizer to take off is read on the record as it is now
// (releaseWrite), not as it was listed: the reporter may have marked it owed since.
// Gone or replaced meanwhile is success.
func deleteRecordAnyway(ctx context.Context, client kubernetes.Interface, ns string, rec container.Record) error {
	c, uid := client.CoreV1().ConfigMaps(ns), rec.UID
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Get(ctx, rec.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if w := releaseWrite(cur, uid); w != nil {
			_, err = c.Update(ctx, w, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = c.Delete(ctx, rec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// DeleteService deletes a Service a gone container left behind (UID precondition: a
// newer container's Service with the same name is never touched).
func (s *Store) DeleteService(ctx context.Context, svc *container.Service) error {
	uid := svc.UID
	err := s.client.CoreV1().Services(s.namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return classify("deleting the Service of a deleted container", err)
	}
	return nil
}

// unmarkOwed undoes a DELETE's mark when the DELETE failed before its Deployment was
// deleted (the client is told to retry): a container that still runs must not hold a
// record that owes its DELETED, as if it were gone (the chaos run, seed 7: a DELETE
// whose mark's answer was lost left a running container's record owing a DELETED for
// good). Detached from the request, UID- and resourceVersion-guarded (an Update): a
// record changed meanwhile is left as it is. The first try is made before the DELETE
// answers; when it gets no answer (the apiserver is away: the failure that failed the
// DELETE, often), it is tried again in the background for up to unmarkFor (seed
// 1475124511: a DELETE failed on an apiserver restart, and the one try, 5 s, ended
// before the apiserver was back), unless a newer DELETE of the id began on this
// replica meanwhile: that one decides. Should every try fail, a retried DELETE
// completes the deletion; should the container be gone meanwhile, the reporter reports
// it whatever the mark says.
func (s *Store) unmarkOwed(id, inc string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	settled := s.tryUnmark(ctx, id, inc)
	cancel()
	if settled {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), unmarkFor)
	done := s.unmarks.start(id, cancel) // a newer DELETE of the id cancels it: it decides
	go func() {
		defer done()
		// A capped wait.Backoff would end its ExponentialBackoff at the cap: a loop.
		for delay := 500 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
			settled := s.tryUnmark(tctx, id, inc)
			tcancel()
			if settled {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
	}()
}

// unmarkFor bounds the background tries of unmarkOwed: longer than an apiserver
// restart takes.
const unmarkFor = 2 * time.Minute

// tryUnmark makes one try of unmarkOwed; false when it got no answer to build on (try
// again), true when it is settled: the mark is off, or is not to be taken off (the
// record is gone, changed, not this incarnation's, or its container is gone).
func (s *Store) tryUnmark(ctx context.Context, id, inc string) bool {
	records := s.client.CoreV1().ConfigMaps(s.namespace)
	cur, err := records.Get(ctx, container.RecordName(id), metav1.GetOptions{})
	if err != nil {
		return apierrors.IsNotFound(err)
	}
	rec, ours := container.RecordOf(cur, id)
	if !ours {
		return true
	}
	live, err := s.liveAtAPIServer(ctx, s.client, id)
	if err != nil {
		return false
	}
	if !unmarkAfterFailedDelete(rec, inc, live) {
		return true
	}
	w := cur.DeepCopy()
	w.Finalizers = withoutRecordFinalizer(w.Finalizers)
	_, err = records.Update(ctx, w, metav1.UpdateOptions{})
	switch {
	case err == nil, apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return true
	default:
		s.log.Warn("DELETE failed and its mark could not be undone yet; trying again (a retried DELETE completes it)", "id", id, "err", err)
		return false
	}
}

// pendingUnmarks are the failed DELETEs' marks being undone in the background, by id:
// a DELETE of the id that begins cancels its undoing (supersede), since that DELETE
// decides. It holds only ids whose undoing is under way (each for at most unmarkFor).
type pendingUnmarks struct {
	mu sync.Mutex
	m  map[string]*pendingUnmark
}

type pendingUnmark struct{ cancel context.CancelFunc }

// start registers an undoing of id's mark that cancel stops; done (deferred by the
// undoing) unregisters it and releases its context.
func (p *pendingUnmarks) start(id string, cancel context.CancelFunc) (done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*pendingUnmark{}
	}
	if old, ok := p.m[id]; ok {
		old.cancel() // the newer failed DELETE's undoing replaces it
	}
	u := &pendingUnmark{cancel: cancel}
	p.m[id] = u
	return func() {
		cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.m[id] == u {
			delete(p.m, id)
		}
	}
}

// supersede stops any undoing of id's mark: a DELETE of id begins.
func (p *pendingUnmarks) supersede(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.m[id]; ok {
		u.cancel()
		delete(p.m, id)
	}
}
