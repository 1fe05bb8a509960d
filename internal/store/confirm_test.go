package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// limiterRefusal is the error a client-go request returns when the Confirm client's
// limiter has no token for it in time: the limiter's own error, wrapped as
// rest.Request.tryThrottle wraps it.
func limiterRefusal(t *testing.T) error {
	t.Helper()
	l := NewConfirmLimiter()
	for range ConfirmBurst {
		if !l.TryAccept() {
			t.Fatal("the burst is smaller than ConfirmBurst")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := l.Wait(ctx)
	if err == nil {
		t.Fatal("an exhausted limiter let a request through")
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err // client-go passes context errors through unwrapped
	}
	return fmt.Errorf("client rate limiter Wait returned an error: %w", err)
}

// Issue 23: 48 clients asking for unknown ids got 503s blaming "the Kubernetes API",
// which was healthy: our own limiter had refused. The answer says which it was.
func TestUnconfirmed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		detail     string // the start of the client's message
		retryAfter int
	}{
		{"our limiter refused", limiterRefusal(t),
			"this provider limits how fast it confirms unknown container ids with the Kubernetes API (20 per second, bursts of 40) and is at that limit; retry after 5 s", 5},
		{"the apiserver is overloaded", apierrors.NewTooManyRequests("slow down", 1),
			"the provider cannot confirm with the Kubernetes API", 0},
		{"the apiserver is unavailable", apierrors.NewServiceUnavailable("restarting"),
			"the provider cannot confirm with the Kubernetes API", 0},
		{"the apiserver did not answer in time", context.DeadlineExceeded,
			"the provider cannot confirm with the Kubernetes API", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var se *Error
			if !errors.As(unconfirmed(tc.err), &se) || se.Kind != KindUnavailable {
				t.Fatalf("unconfirmed(%v) = %v, want KindUnavailable", tc.err, unconfirmed(tc.err))
			}
			if !strings.HasPrefix(se.Message, tc.detail) || se.RetryAfter != tc.retryAfter {
				t.Errorf("message %q, retry after %d; want %q, %d", se.Message, se.RetryAfter, tc.detail, tc.retryAfter)
			}
			if !errors.Is(se, tc.err) {
				t.Error("the cause is not kept for the log")
			}
		})
	}
}

// A GET miss whose container lives at the apiserver but is not in this replica's caches
// yet: the Deployment appears in the main client (so in the caches) only after the
// Confirm client answered. commit runs on the Confirm client's Deployments list; slow
// makes that list take the whole ConfirmWait.
func missOfALiveContainer(t *testing.T, record bool, slow time.Duration) (container.Observed, error) {
	t.Helper()
	var objs []runtime.Object
	if record {
		objs = append(objs, recordLease(time.Minute, false))
	}
	s, main, confirm := fakeStore(t, objs...)
	startCaches(t, s)
	// Confirm sees the record (if any) and the Deployment; the caches do not yet.
	if err := confirm.Tracker().Add(deployment("web", "i1")); err != nil {
		t.Fatal(err)
	}
	if record {
		// The caches show the record: take it out of them by deleting it from main.
		if err := main.Tracker().Delete(leasesGVR, ns, container.RecordName("x")); err != nil {
			t.Fatal(err)
		}
	}
	confirm.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(slow)
		go func() {
			time.Sleep(50 * time.Millisecond) // the watch is a moment behind
			if err := main.Tracker().Add(deployment("web", "i1")); err != nil {
				t.Error(err)
			}
		}()
		return false, nil, nil
	})
	return s.Get(context.Background(), "x")
}

// Issue 23: a miss with no record answered 404 without asking for Deployments: a
// container without a record (the reference provider's, or its record deleted by hand)
// that this replica's cache did not show yet got a 404.
func TestMissWithoutRecordAsksForTheDeployment(t *testing.T) {
	o, err := missOfALiveContainer(t, false, 0)
	if err != nil || o.Deployment == nil || o.Deployment.Name != "web" {
		t.Fatalf("Get = %+v, %v; want the container", o, err)
	}
}

// Issue 23: the limiter wait, the reads and the wait for the cache shared one ConfirmWait:
// reads that took it all left the cache no time, and a live container got a 503.
func TestMissWaitsForTheCacheOnItsOwnBound(t *testing.T) {
	o, err := missOfALiveContainer(t, true, ConfirmWait+100*time.Millisecond)
	if err != nil || o.Deployment == nil || o.Deployment.Name != "web" {
		t.Fatalf("Get = %+v, %v; want the container", o, err)
	}
}
