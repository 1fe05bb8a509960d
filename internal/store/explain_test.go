package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// A refused write asks the apiserver what is missing (one access review per
// permission) at most once per explainEvery, and an admission policy's refusal never.
func TestExplainForbiddenIsRateLimited(t *testing.T) {
	client := fake.NewClientset()
	var reviews atomic.Int32
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		r.Status.Allowed = r.Spec.ResourceAttributes.Verb != "delete"
		return true, r, nil
	})
	s, err := New(client, "dcm", 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakePassiveClock(time.Now())
	s.Clock = clock
	dep := schema.GroupResource{Group: "apps", Resource: "deployments"}
	rbac := func() error {
		return classify("deleting", apierrors.NewForbidden(dep, "web", errors.New(`User "sp" cannot delete resource "deployments"`)))
	}
	policy := func() error { return classify("creating", webhookDenial(403, "", "no")) }

	explain := func(err error) string {
		var se *Error
		if !errors.As(s.explainForbidden(context.Background(), err), &se) {
			t.Fatal("not an *Error")
		}
		return se.Message
	}
	n := int32(len(Required))
	for i, step := range []struct {
		name    string
		advance time.Duration
		err     func() error
		reviews int32 // in all, after the step
	}{
		{"an admission policy's refusal: no review", 0, policy, 0},
		{"the first RBAC refusal asks", 0, rbac, n},
		{"again at once: the last answer", 0, rbac, n},
		{"a hundred more within the window: no more", 0, rbac, n},
		{"once the window passed: asks again", explainEvery, rbac, 2 * n},
		{"a policy refusal after it: still none", time.Second, policy, 2 * n},
	} {
		clock.SetTime(clock.Now().Add(step.advance))
		reps := 1
		if i == 3 {
			reps = 100
		}
		var msg string
		for range reps {
			msg = explain(step.err())
		}
		if got := reviews.Load(); got != step.reviews {
			t.Errorf("%s: %d access reviews in all, want %d", step.name, got, step.reviews)
		}
		if step.err().(*Error).Kind == KindPermission && !strings.Contains(msg, "may not delete apps/deployments") {
			t.Errorf("%s: message %q does not name what is missing", step.name, msg)
		}
	}
}
