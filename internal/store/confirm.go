package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// ConfirmWait bounds a confirmation's wait for the limiter and its reads together.
const ConfirmWait = 2 * time.Second

// ConfirmCacheWait bounds the wait for this replica's cache to show a container another
// replica just made. It is apart from ConfirmWait, so a slow limiter or apiserver cannot
// leave the cache no time and a live container a 503.
const ConfirmCacheWait = 2 * time.Second

// ConfirmQPS and ConfirmBurst bound what a flood of GETs for unknown ids costs the
// apiserver (Store.Confirm). Past it, a GET waits up to ConfirmWait, then answers 503.
const (
	ConfirmQPS   = 20
	ConfirmBurst = 40
	// ConfirmRetryAfter is a refused GET's Retry-After (seconds): past a full burst refill.
	ConfirmRetryAfter = 5
)

// errConfirmLimited: the limiter refused within ConfirmWait; the apiserver was not asked.
var errConfirmLimited = errors.New("the confirmation rate limiter refused the request")

// NewConfirmLimiter is the Confirm client's rate limiter. Its refusals say so, so the
// client is not told the Kubernetes API failed when it was never asked.
func NewConfirmLimiter() flowcontrol.RateLimiter {
	return confirmLimiter{flowcontrol.NewTokenBucketRateLimiter(ConfirmQPS, ConfirmBurst)}
}

type confirmLimiter struct{ flowcontrol.RateLimiter }

func (l confirmLimiter) Wait(ctx context.Context) error {
	if err := l.RateLimiter.Wait(ctx); err != nil {
		return fmt.Errorf("%w: %w", errConfirmLimited, err)
	}
	return nil
}

// confirmMiss decides a cache miss (answerMiss) with one read through the Confirm client;
// for a young live record it waits ConfirmCacheWait for the cache to show the container.
func (s *Store) confirmMiss(ctx context.Context, id string) (container.Observed, error) {
	var f found
	var err error
	for {
		switch answerMiss(f, s.informers.isEnded(id, string(f.Rec.UID)), s.Clock.Now(), s.CreateTimeout) {
		case missReadRecord:
			f, err = s.readRecord(ctx, id, true)
		case missNotFound:
			return container.Observed{}, ErrNotFound
		case missUnconfirmed:
			return container.Observed{}, unconfirmed(err)
		case missWaitForCache:
			var o container.Observed
			wctx, wcancel := context.WithTimeout(ctx, ConfirmCacheWait)
			err := waitCached(wctx, func() bool {
				var ok bool
				o, ok = s.Snapshot(id).Observed()
				return ok
			})
			wcancel()
			if err == nil {
				return o, nil
			}
			return container.Observed{}, &kubeerr.Error{Kind: kubeerr.KindUnavailable, Err: fmt.Errorf("the record of %q lives, the cache shows no container", id),
				Message: "the container is being created, or this replica has not caught up with the cluster yet; retry later"}
		}
	}
}

// lookupOf is how a read went, from its error.
func lookupOf(err error) lookup {
	switch {
	case err == nil:
		return answered
	case apierrors.IsNotFound(err):
		return absent
	}
	return failed
}

// unconfirmed is the 503 of a miss the apiserver could not confirm or our limiter refused.
func unconfirmed(err error) error {
	if errors.Is(err, errConfirmLimited) {
		return &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: ConfirmRetryAfter, Err: fmt.Errorf("confirming a cache miss: %w", err),
			Message: fmt.Sprintf("this provider limits how fast it confirms unknown container ids with the Kubernetes API "+
				"(%d per second, bursts of %d) and is at that limit; retry after %d s", ConfirmQPS, ConfirmBurst, ConfirmRetryAfter)}
	}
	return &kubeerr.Error{Kind: kubeerr.KindUnavailable, Err: fmt.Errorf("confirming a cache miss: %w", err),
		Message: "the provider cannot confirm with the Kubernetes API that the container does not exist; retry later"}
}
