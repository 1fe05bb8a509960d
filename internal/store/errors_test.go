package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
			if !errors.As(classify("op", tc.err), &se) {
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
		})
	}
}
