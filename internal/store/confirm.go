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

// ConfirmWait bounds a confirmation's requests to the apiserver: the wait for the
// Confirm client's limiter and the reads themselves.
const ConfirmWait = 2 * time.Second

// ConfirmCacheWait bounds, on its own, how long a read then waits for this replica's
// cache to show a container the apiserver has: another replica created it a moment ago,
// and the watch is milliseconds behind. Its own bound, so that reads slowed by the
// limiter or the apiserver do not leave the cache no time, and a live container no
// answer but a 503.
const ConfirmCacheWait = 2 * time.Second

// ConfirmQPS and ConfirmBurst limit the confirmations (the client given as Store.Confirm):
// a flood of GETs for unknown ids costs the apiserver at most this. Past it, a GET waits
// for the limiter (at most ConfirmWait) and then answers 503 (see confirmMiss).
const (
	ConfirmQPS   = 20
	ConfirmBurst = 40
	// ConfirmRetryAfter is how long (seconds) a GET the limiter refused is told to
	// wait (Retry-After): the limiter refills its whole burst in 2 s.
	ConfirmRetryAfter = 5
)

// errConfirmLimited marks a confirmation that the limiter refused: it would not get a
// token within ConfirmWait. The apiserver was not asked.
var errConfirmLimited = errors.New("the confirmation rate limiter refused the request")

// NewConfirmLimiter is the rate limiter of the Confirm client (its rest.Config's
// RateLimiter): ConfirmQPS, ConfirmBurst, and a refusal that says it is one, so the
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

// confirmMiss decides a cache miss with the apiserver (see answerMiss): one read of
// the id's record, by name, through the Confirm client, within ConfirmWait. When a
// young record lives, it waits (ConfirmCacheWait) for this replica's cache to show the
// container.
func (s *Store) confirmMiss(ctx context.Context, id string) (container.Observed, error) {
	var f found
	var err error
	for {
		switch answerMiss(f, s.table.Ended(id, string(f.Rec.UID)), s.Clock.Now(), s.CreateTimeout) {
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
				o, ok = s.observed(id)
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

// unconfirmed is the 503 of a miss the apiserver could not confirm, or that our own
// limiter did not let us ask it about.
func unconfirmed(err error) error {
	if errors.Is(err, errConfirmLimited) {
		return &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: ConfirmRetryAfter, Err: fmt.Errorf("confirming a cache miss: %w", err),
			Message: fmt.Sprintf("this provider limits how fast it confirms unknown container ids with the Kubernetes API "+
				"(%d per second, bursts of %d) and is at that limit; retry after %d s", ConfirmQPS, ConfirmBurst, ConfirmRetryAfter)}
	}
	return &kubeerr.Error{Kind: kubeerr.KindUnavailable, Err: fmt.Errorf("confirming a cache miss: %w", err),
		Message: "the provider cannot confirm with the Kubernetes API that the container does not exist; retry later"}
}
