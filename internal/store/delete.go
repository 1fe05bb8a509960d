package store

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Delete removes a container: its record and its Deployment are deleted at once (two
// requests), and the garbage collector deletes the rest (its Service, its pods through
// the ReplicaSet). The record's finalizer keeps it, terminating, until the status
// reporter has delivered the DELETED, across restarts and NATS outages; nothing here
// waits for that. When the cache shows no live record, the DELETE first waits out the
// reservation window (planDelete), then reads the record by name at the apiserver.
// The record as the apiserver answered goes into this replica's cache, so a GET that
// follows is a 404.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.explainForbidden(ctx, s.delete(ctx, id))
}

func (s *Store) delete(ctx context.Context, id string) error {
	began := s.Clock.Now()
	snap := s.Snapshot(id)
	f := deleteFacts{Cached: snap.Record}
	var readErr error
	confirm := false
	for again := true; ; {
		switch planDelete(f) {
		case deleteWait:
			if w := lateCreateWait(began, s.Clock.Now(), s.ReserveWindow); w > 0 {
				if err := sleep(ctx, w); err != nil {
					return classify("waiting for creates that began before the DELETE", err)
				}
			}
			f.Waited = true
			snap = s.Snapshot(id)
			f.Cached = snap.Record
		case deleteReadRecord:
			confirm = confirmDeleteReads(f.Cached != nil)
			f.Record, readErr = s.readRecord(ctx, id, confirm)
		case deleteNotFound:
			return ErrNotFound
		case deleteUnconfirmed:
			if confirm {
				return unconfirmed(readErr)
			}
			return classify("reading the container record", readErr)
		case deleteIt:
			rec, dep := f.Record.Rec, (*container.Deployment)(nil)
			if f.Cached != nil && !f.Cached.Terminating {
				rec, dep = *f.Cached, snap.Live()
			}
			replaced, err := s.deleteContainer(ctx, id, rec, dep)
			if !replaced || !again {
				return err
			}
			// The cache's record was an earlier container's: this DELETE is about
			// the id's container as it is now.
			again, f = false, deleteFacts{Waited: true}
		}
	}
}

// readRecord reads the id's record by name at the apiserver, through the Confirm client
// (within ConfirmWait) when confirm says so.
func (s *Store) readRecord(ctx context.Context, id string, confirm bool) (found, error) {
	client := s.client
	if confirm {
		client = s.Confirm
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ConfirmWait)
		defer cancel()
	}
	c, err := client.CoreV1().ConfigMaps(s.namespace).Get(ctx, container.RecordName(id), metav1.GetOptions{})
	f := found{Read: lookupOf(err)}
	f.Rec, f.Ours = container.RecordOf(c, id)
	return f, err
}

// deleteContainer deletes record rec (foreground propagation, its UID as a
// precondition) and, at the same time, Deployment dep (when the cache showed it: else
// the garbage collector does). replaced: the record is another one by now (a newer
// container of the id), and nothing was deleted.
func (s *Store) deleteContainer(ctx context.Context, id string, rec container.Record, dep *container.Deployment) (replaced bool, err error) {
	var depErr error
	var wg sync.WaitGroup
	if dep != nil {
		wg.Go(func() {
			uid, bg := dep.UID, metav1.DeletePropagationBackground
			depErr = s.client.AppsV1().Deployments(s.namespace).Delete(ctx, dep.Name,
				metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
		})
	}
	c, err := deleteRecordOf(ctx, s.client, s.namespace, rec.Name, rec.UID, metav1.DeletePropagationForeground)
	wg.Wait()
	switch {
	case apierrors.IsConflict(err):
		return true, nil
	case apierrors.IsNotFound(err):
		return false, ErrNotFound // deleted, and its DELETED delivered, a moment ago
	case err != nil:
		return false, classify("deleting the container record", err)
	}
	if depErr != nil && !apierrors.IsNotFound(depErr) && !apierrors.IsConflict(depErr) {
		// The record is deleted: the garbage collector deletes the Deployment.
		s.log.Warn("DELETE: the Deployment is left to the garbage collector", "id", id, "err", depErr)
	}
	if c != nil {
		s.wrote(recordKind, id, c)
	}
	return false, nil
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
