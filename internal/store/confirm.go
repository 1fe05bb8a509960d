package store

import (
	"context"
	"fmt"
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
// for the limiter (at most ConfirmWait) and then answers 503 (see confirmMiss).
const (
	ConfirmQPS   = 20
	ConfirmBurst = 40
)

// confirmMiss decides a cache miss with the apiserver: the id's record, read from etcd.
// None, or one that owes a DELETED or is being deleted: the container does not exist,
// and the 404 is authoritative. A live record: the container exists, or a create is in
// progress: the container's Deployment is looked up at the apiserver too; none live is a
// 404, one live means this cache is behind: wait (at most ConfirmWait) for it. When the apiserver
// cannot answer (an outage, or this replica's confirmations are over their limit), or
// the cache does not show a container whose record lives, the answer is 503: a 404
// from the cache alone could be wrong (the chaos run's seed 11: a replica whose watch
// was broken by an apiserver restart answered 404 for a container created meanwhile).
func (s *Store) confirmMiss(ctx context.Context, id string) (container.Observed, error) {
	ctx, cancel := context.WithTimeout(ctx, ConfirmWait)
	defer cancel()
	l, err := s.Confirm.CoordinationV1().Leases(s.namespace).Get(ctx, container.RecordName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return container.Observed{}, ErrNotFound
	}
	if err != nil {
		return container.Observed{}, unconfirmed(err)
	}
	rec, ok := container.RecordOf(l, id)
	if !ok || rec.Owed || rec.Terminating {
		return container.Observed{}, ErrNotFound
	}
	// A live record: a create in progress, a container this cache has not seen yet, or
	// one whose Deployment was deleted by hand a moment ago (its record not yet marked).
	live, err := s.liveAtAPIServer(ctx, s.Confirm, id)
	if err != nil {
		return container.Observed{}, unconfirmed(err)
	}
	if !live {
		return container.Observed{}, ErrNotFound
	}
	var o container.Observed
	err = waitCached(ctx, func() bool {
		o, ok = s.observed(id)
		return ok
	})
	if err != nil {
		return container.Observed{}, &Error{Kind: KindUnavailable, Err: fmt.Errorf("the record of %q lives, the cache shows no container", id),
			Message: "the container is being created, or this replica has not caught up with the cluster yet; retry later"}
	}
	return o, nil
}

// unconfirmed is the 503 of a miss the apiserver could not confirm.
func unconfirmed(err error) error {
	return &Error{Kind: KindUnavailable, Err: fmt.Errorf("confirming a cache miss: %w", err),
		Message: "the provider cannot confirm with the Kubernetes API that the container does not exist; retry later"}
}
