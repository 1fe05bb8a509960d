package store

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// ConfirmWait bounds how long a read waits for this replica's cache to show a container
// whose record exists: another replica created it a moment ago, and the watch is
// milliseconds behind.
const ConfirmWait = 2 * time.Second

// ConfirmQPS and ConfirmBurst limit the confirmations (the client given as Store.Confirm):
// a flood of GETs for unknown ids costs the apiserver at most this. Past it, a GET waits
// for the limiter (at most ConfirmWait) and then answers from the cache alone.
const (
	ConfirmQPS   = 20
	ConfirmBurst = 40
)

// confirmMiss decides a cache miss with the apiserver: the id's record, read from etcd.
// None, or one that owes a DELETED or is being deleted: the container does not exist,
// and the 404 is authoritative. A live record: the container exists, or a create is in
// progress; wait (at most ConfirmWait) for the cache to show it. When the apiserver
// cannot answer, the cache's answer stands (reads keep working during an outage).
func (s *Store) confirmMiss(ctx context.Context, id string) (container.Observed, bool) {
	ctx, cancel := context.WithTimeout(ctx, ConfirmWait)
	defer cancel()
	l, err := s.Confirm.CoordinationV1().Leases(s.namespace).Get(ctx, container.RecordName(id), metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			s.log.Debug("cannot confirm a cache miss; answering from the cache", "id", id, "err", err)
		}
		return container.Observed{}, false
	}
	rec, ok := container.RecordOf(l, id)
	if !ok || rec.Owed || rec.Terminating {
		return container.Observed{}, false
	}
	var o container.Observed
	err = waitCached(ctx, func() bool {
		o, ok = s.observed(id)
		return ok
	})
	return o, err == nil
}
