package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
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
			var se *kubeerr.Error
			if !errors.As(unconfirmed(tc.err), &se) || se.Kind != kubeerr.KindUnavailable {
				t.Fatalf("unconfirmed(%v) = %v, want kubeerr.KindUnavailable", tc.err, unconfirmed(tc.err))
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
