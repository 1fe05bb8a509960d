package kubeerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// webhookDenial is a validating webhook's refusal as the apiserver returns it
// (k8s.io/apiserver/pkg/admission/plugin/webhook/errors.ToStatusErr): the webhook's
// status, its message prefixed with the webhook's name.
func webhookDenial(code int32, reason metav1.StatusReason, msg string) error {
	const denied = `admission webhook "policy.example.com" denied the request`
	st := metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: denied + " without explanation"}
	if msg != "" {
		st.Message = denied + ": " + msg
	}
	return &apierrors.StatusError{ErrStatus: st}
}

func TestClassify(t *testing.T) {
	dep := schema.GroupResource{Group: "apps", Resource: "deployments"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web-x", field.ErrorList{
		field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), "x y", "must not contain spaces"),
		field.Required(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("env").Index(2).Child("name"), ""),
		field.Invalid(field.NewPath("spec", "strategy"), "x", "unsupported"),
	})
	cases := []struct {
		name   string
		err    error
		kind   Kind
		fields []string
	}{
		{"field errors name request fields", invalid, KindInvalid, []string{"#/spec/image/reference", "#/spec/process/env", "#/spec"}},
		{"admission denial without causes", apierrors.NewBadRequest("denied"), KindInvalid, []string{"#/spec"}},
		{"quota", apierrors.NewForbidden(dep, "web", errors.New("exceeded quota: q, requested: count/deployments.apps=1")), KindQuota, []string{"#/spec/resources"}},
		{"rbac", apierrors.NewForbidden(dep, "web", errors.New("cannot create")), KindPermission, nil},
		{"rbac as the apiserver words it", apierrors.NewForbidden(dep, "", errors.New(`User "system:serviceaccount:dcm:sp" cannot create resource "deployments" in API group "apps" in the namespace "dcm"`)), KindPermission, nil},
		// Admission refusals, as k8s.io/apiserver words them, whatever code the policy
		// chose: the cluster's rules, not the provider's RBAC (issue 23: a webhook's 403
		// became 21 access reviews and a 503, retried forever).
		{"webhook denial, default 403", webhookDenial(403, "", "containers must not set env FOO"), KindInvalid, []string{"#/spec"}},
		{"webhook denial, 403 Forbidden", webhookDenial(403, metav1.StatusReasonForbidden, "label team is required"), KindInvalid, []string{"#/spec"}},
		{"webhook denial, 400", webhookDenial(400, metav1.StatusReasonBadRequest, "bad image registry"), KindInvalid, []string{"#/spec"}},
		{"webhook denial, 422", webhookDenial(422, metav1.StatusReasonInvalid, "replicas must be 1"), KindInvalid, []string{"#/spec"}},
		{"webhook denial without explanation", webhookDenial(403, "", ""), KindInvalid, []string{"#/spec"}},
		{"ValidatingAdmissionPolicy denial", apierrors.NewForbidden(dep, "web-x", errors.New(
			"ValidatingAdmissionPolicy 'deny-label' with binding 'deny-label' denied request: failed expression: !has(object.metadata.labels.deny)")), KindInvalid, []string{"#/spec"}},
		// A webhook that failed (not a denial) is the cluster unavailable: 500s stay so.
		{"webhook call failed", apierrors.NewInternalError(errors.New(`failed calling webhook "x.example.com": connection refused`)), KindUnavailable, nil},
		{"server timeout", apierrors.NewServerTimeout(dep, "create", 1), KindUnavailable, nil},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), KindUnavailable, nil},
		{"unavailable", apierrors.NewServiceUnavailable("down"), KindUnavailable, nil},
		{"connection refused", &url.Error{Op: "Post", URL: "https://127.0.0.1:1", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, KindUnavailable, nil},
		{"deadline", fmt.Errorf("waiting: %w", context.DeadlineExceeded), KindUnavailable, nil},
		// The apiserver's own 500 is its failure, not the client's nor ours: retry later
		// (the chaos run, seed 11: a restarted apiserver answered "failed to allocate a
		// serviceIP: range is full" until its allocator had loaded).
		{"apiserver internal error", apierrors.NewInternalError(errors.New(`failed to allocate a serviceIP for Service "app-x4q4z": range is full`)), KindUnavailable, nil},
		{"something else", errors.New("a bug of ours"), KindInternal, nil},
		{"too large for the apiserver", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), KindInvalid, []string{"#/spec"}},
		{"too large for etcd", apierrors.NewInternalError(errors.New("etcdserver: request is too large")), KindInvalid, []string{"#/spec"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var se *Error
			if !errors.As(Classify("op", tc.err), &se) {
				t.Fatal("not an *Error")
			}
			if se.Kind != tc.kind {
				t.Errorf("kind = %d, want %d (%v)", se.Kind, tc.kind, se)
			}
			var got []string
			for _, f := range se.Fields {
				got = append(got, f.Pointer)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.fields) {
				t.Errorf("fields = %v, want %v", got, tc.fields)
			}
			if !errors.Is(se, tc.err) {
				t.Error("the cause is not kept for the log")
			}
			if strings.Contains(tc.name, "denial") && (len(se.Fields) != 1 || !strings.Contains(se.Fields[0].Detail, apiMessage(tc.err))) {
				t.Errorf("fields %v do not carry the policy's %q", se.Fields, apiMessage(tc.err))
			}
		})
	}
}
