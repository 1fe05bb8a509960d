package store

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// Delete removes a container: its record, Deployment and Service are deleted at once; the
// garbage collector deletes the rest. The record's finalizer keeps it until the status
// controller delivers the DELETED, across restarts. With no live record cached, Delete
// waits out the reservation window (planDelete), then reads the record at the apiserver.
// The answer goes into this replica's cache, so a GET that follows is a 404.
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
					return kubeerr.Classify("waiting for creates that began before the DELETE", err)
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
			return kubeerr.Classify("reading the container record", readErr)
		case deleteIt:
			rec, seen := f.Record.Rec, container.Observed{}
			if f.Cached != nil && !f.Cached.Terminating {
				rec = *f.Cached
				seen, _ = snap.Observed()
			}
			replaced, err := s.deleteContainer(ctx, id, rec, seen)
			if !replaced || !again {
				return err
			}
			// The cached record was an earlier container's: delete the current one.
			again, f = false, deleteFacts{Waited: true}
		}
	}
}

// readRecord reads the id's record at the apiserver, through the Confirm client if confirm.
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

// deleteContainer deletes record rec (UID as precondition) and, concurrently, the
// Deployment and Service the cache showed (seen). With the Deployment seen, background
// propagation, so a garbage collector catching up cannot hold the record (and the id);
// otherwise foreground, so the workload goes now. The status controller deletes what this
// missed as orphans. replaced: the record is a newer container's, and nothing was deleted.
func (s *Store) deleteContainer(ctx context.Context, id string, rec container.Record, seen container.Observed) (replaced bool, err error) {
	var depErr, svcErr error
	var wg sync.WaitGroup
	propagation := metav1.DeletePropagationForeground
	if d := seen.Deployment; d != nil {
		propagation = metav1.DeletePropagationBackground
		wg.Go(func() { depErr = s.deleteDeployment(ctx, d.Name, d.UID) })
	}
	if v := seen.Service; v != nil {
		wg.Go(func() { svcErr = s.deleteService(ctx, v.Name, v.UID) })
	}
	c, err := deleteRecordOf(ctx, s.client, s.namespace, rec.Name, rec.UID, propagation)
	wg.Wait()
	switch {
	case apierrors.IsConflict(err):
		return true, nil
	case apierrors.IsNotFound(err):
		return false, ErrNotFound // deleted, and its DELETED delivered, a moment ago
	case err != nil:
		return false, kubeerr.Classify("deleting the container record", err)
	}
	for _, e := range []error{depErr, svcErr} {
		if e != nil && !gone(e) {
			// The record is deleted: the garbage collector deletes the rest once it goes.
			s.log.Warn("DELETE: an object of the container is left to the garbage collector", "id", id, "err", e)
		}
	}
	if c != nil {
		s.wrote(c)
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
