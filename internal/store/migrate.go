package store

import (
	"context"
	"fmt"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Versions before ConfigMap records kept each container's record in a Lease. DCM's
// Helm chart grants its providers no Leases, so records are ConfigMaps now, and the
// Lease records an earlier version left are moved once, at start, before the store
// serves (Start; Synced and every create and DELETE wait for it): the ConfigMap record
// is made with the Lease's labels and its finalizer (DELETED owed), then the Lease's
// finalizer is removed and the Lease deleted (UID precondition). Moving before serving
// keeps one kind of record for every decision of the store and the reporter: a store
// that also read Lease records would have to decide, at each of them, which kind wins.
//
// Leases are optional: where they cannot be listed (Forbidden: DCM's Role) there is
// nothing to move, and that is no fault. The move is idempotent and safe with replicas
// doing it at once: a ConfigMap that exists (AlreadyExists) is the record moved by
// someone else, given the Lease's DELETED owed mark when it lacks it (movedRecordWrite);
// the Lease's update and delete are guarded by its resourceVersion and UID.

// LeaseMove says what the move of Lease records did.
type LeaseMove struct {
	// Granted: Leases could be listed (else there was nothing to move).
	Granted bool
	// Moved is how many Lease records were moved (their ConfigMap made or found, the
	// Lease deleted).
	Moved int
	// Left are the ids whose Lease record could not be deleted (its ConfigMap record
	// exists): the Role lets Leases be listed but not updated or deleted. They are
	// tried again at the next start.
	Left []string
	// Foreign are the ids whose Lease record was not moved because a ConfigMap with the
	// record's name is not a record (never touched); the Lease is left as it is.
	Foreign []string
}

// String is the "leases: …" part of the start-up line.
func (m LeaseMove) String() string {
	if !m.Granted {
		return "not granted (nothing to migrate)"
	}
	s := fmt.Sprintf("granted, moved %d Lease records", m.Moved)
	if len(m.Left) > 0 {
		s += fmt.Sprintf(", %d Leases left (no right to delete them)", len(m.Left))
	}
	if len(m.Foreign) > 0 {
		s += fmt.Sprintf(", %d not moved (a ConfigMap of someone else has the record's name)", len(m.Foreign))
	}
	return s
}

// MoveLeaseRecords moves the Lease records in namespace to ConfigMaps (see above).
// An error is a failure to reach or write the apiserver: calling it again goes on
// where it stopped.
func MoveLeaseRecords(ctx context.Context, client kubernetes.Interface, namespace string) (LeaseMove, error) {
	var m LeaseMove
	leases := client.CoordinationV1().Leases(namespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: container.LabelManagedBy + "=" + container.ManagedByValue})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) { // not granted, or no Lease API served
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("listing Leases: %w", err)
	}
	m.Granted = true
	records := client.CoreV1().ConfigMaps(namespace)
	for i := range list.Items {
		id := container.InstanceID(list.Items[i].Labels)
		if _, ok := container.RecordOf(&list.Items[i], id); !ok {
			continue // someone else's Lease
		}
		// Read again: the list may be old by now, and a record another replica moved
		// and whose DELETED was delivered since must not be made again from it.
		l, err := leases.Get(ctx, list.Items[i].Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil && !apierrors.IsForbidden(err) {
			return m, fmt.Errorf("reading the Lease record of %q: %w", id, err)
		}
		if err != nil { // listed but not read (a Role granting list alone): as listed
			l = &list.Items[i]
		}
		rec, ok := container.RecordOf(l, id)
		if !ok {
			continue
		}
		if want := moveTarget(l, rec, id); want != nil {
			_, err := records.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				foreign := false
				err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur, err := records.Get(ctx, want.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					var w *corev1.ConfigMap
					if w, foreign = movedRecordWrite(cur, rec, id); w != nil {
						_, err = records.Update(ctx, w, metav1.UpdateOptions{})
					}
					return err
				})
				if apierrors.IsNotFound(err) {
					// Moved and deleted meanwhile (its DELETED delivered by a replica that
					// moved it first): the Lease goes.
					err = nil
				}
				if foreign {
					m.Foreign = append(m.Foreign, id)
					continue
				}
			}
			if err != nil {
				return m, fmt.Errorf("moving the record of %q to a ConfigMap: %w", id, err)
			}
		}
		switch err := dropRecord(ctx, leases, l.Name, rec.UID); {
		case apierrors.IsForbidden(err):
			m.Left = append(m.Left, id)
		case err != nil:
			return m, fmt.Errorf("deleting the Lease record of %q: %w", id, err)
		default:
			m.Moved++
		}
	}
	return m, nil
}

// moveTarget is the ConfigMap record that Lease record l (read as rec) of container id
// becomes: its labels (with the record marker, so the record informer selects it) and
// DELETED owed; nil when l is being deleted and owes nothing (it is going anyway, as it
// would have under the version that made it).
func moveTarget(l *coordinationv1.Lease, rec container.Record, id string) *corev1.ConfigMap {
	if rec.Terminating && !rec.Owed {
		return nil
	}
	labels := maps.Clone(l.Labels)
	maps.Copy(labels, container.RecordLabels(id, rec.Incarnation))
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Labels: labels}}
	if rec.Owed {
		c.Finalizers = []string{container.RecordFinalizer}
	}
	return c
}

// movedRecordWrite decides what the move writes to the ConfigMap cur it found with the
// name of container id's record, for the Lease record lease: foreign when cur is not a
// record (it is never touched, the Lease stays); the DELETED owed mark when the Lease
// owes it and cur, the same incarnation and not being deleted, does not (a replica of
// the earlier version marked the Lease after this one was made: a DELETED owed is never
// dropped); else nothing. A record of another incarnation is a newer container of the
// id: it is left as it is.
func movedRecordWrite(cur *corev1.ConfigMap, lease container.Record, id string) (w *corev1.ConfigMap, foreign bool) {
	rec, ok := container.RecordOf(cur, id)
	if !ok {
		return nil, true
	}
	if !lease.Owed || rec.Owed || rec.Terminating || rec.Incarnation != lease.Incarnation {
		return nil, false
	}
	w = cur.DeepCopy()
	w.Finalizers = append(w.Finalizers, container.RecordFinalizer)
	return w, false
}

// errMoving answers a create or DELETE whose time ran out while the Lease records of
// an earlier version were being moved (at start, once: the apiserver did not answer).
var errMoving = &Error{Kind: KindUnavailable, RetryAfter: 1,
	Message: "the provider is starting (moving its container records from Leases to ConfigMaps); retry"}

// moveLeases runs the move until it succeeds or ctx ends, retrying an unreachable or
// refusing apiserver with a backoff (a warning each time). Start runs it.
func (s *Store) moveLeases(ctx context.Context) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Cap: 10 * time.Second, Steps: 1 << 30}
	for {
		err := s.MoveLeases(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		s.log.Warn("cannot move the container records of an earlier version from Leases to ConfigMaps yet; creates and DELETEs wait", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff.Step()):
		}
	}
}

// MoveLeases moves the Lease records of an earlier version once (MoveLeaseRecords) and,
// when that succeeded, opens the store: until then it is not synced, and creates and
// DELETEs answer 503. Start runs it (retrying); a store whose caches are never started
// (a test of creates alone) calls it itself.
func (s *Store) MoveLeases(ctx context.Context) error {
	m, err := MoveLeaseRecords(ctx, s.client, s.namespace)
	if err != nil {
		return err
	}
	s.moveOnce.Do(func() {
		s.leaseMove = m
		close(s.moved)
	})
	return nil
}

// waitMoved waits (bounded by ctx) until the move is done: a create or DELETE that
// arrives at start waits the few milliseconds it takes (one LIST when there is nothing
// to move), rather than being refused.
func (s *Store) waitMoved(ctx context.Context) error {
	select {
	case <-s.moved:
		return nil
	case <-ctx.Done():
		return errMoving
	}
}

// movedYet is nil once the move is done, errMoving before.
func (s *Store) movedYet() error {
	select {
	case <-s.moved:
		return nil
	default:
		return errMoving
	}
}

// LeaseMove is what the move at start did; false until it is done.
func (s *Store) LeaseMove() (LeaseMove, bool) {
	if s.movedYet() != nil {
		return LeaseMove{}, false
	}
	return s.leaseMove, true
}
