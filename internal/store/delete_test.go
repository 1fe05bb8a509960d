package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcm-project/k8s-container-sp/internal/access"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// Each way a DELETE goes, as the exact requests it makes and what it answers. A
// container the cache shows: its record, Deployment and Service deleted at once, no
// read. One it does not show: after the reservation window, its record read by name,
// and deleted when it lives.
func TestDeleteRequests(t *testing.T) {
	const (
		dep = "DELETE deployments/web-abcde"
		svc = "DELETE services/web-fghij"
	)
	conflict := refuse(apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "dcm-container-x", errors.New("the UID in the precondition does not match")))
	forbidden := refuse(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "dcm-container-x", errors.New("RBAC")))
	var checks []string // a permission check: one access review per permission
	for range access.Required {
		checks = append(checks, "POST selfsubjectaccessreviews")
	}
	for _, tc := range []struct {
		name    string
		cached  bool // the cache shows container x
		answers map[string]answer
		want    []string
		err     error        // errors.Is; nil: see kind
		kind    kubeerr.Kind // KindInternal: no error
	}{
		{name: "shown by the cache: three deletes at once, no read", cached: true,
			want: []string{"DELETE " + recordPath, dep, svc}},
		{name: "not shown, unknown at the apiserver: one read, 404",
			want: []string{"GET " + recordPath}, err: ErrNotFound},
		{name: "not shown, its record lives: read, then deleted",
			answers: map[string]answer{"GET configmaps": {obj: recordX("")}},
			want:    []string{"DELETE " + recordPath, "GET " + recordPath}},
		{name: "not shown, its record terminating: 404",
			answers: map[string]answer{"GET configmaps": {obj: recordX("", deletingRecord)}},
			want:    []string{"GET " + recordPath}, err: ErrNotFound},
		{name: "not shown, the read fails: 503",
			answers: map[string]answer{"GET configmaps": unavailable},
			want:    []string{"GET " + recordPath}, kind: kubeerr.KindUnavailable},
		{name: "the cache's record was replaced: the id read again",
			cached: true, answers: map[string]answer{"DELETE configmaps": conflict},
			want: []string{"DELETE " + recordPath, dep, svc, "GET " + recordPath}, err: ErrNotFound},
		{name: "the record gone a moment ago: 404",
			cached: true, answers: map[string]answer{"DELETE configmaps": recordGone},
			want: []string{"DELETE " + recordPath, dep, svc}, err: ErrNotFound},
		{name: "the record's delete fails: 503",
			cached: true, answers: map[string]answer{"DELETE configmaps": unavailable},
			want: []string{"DELETE " + recordPath, dep, svc}, kind: kubeerr.KindUnavailable},
		{name: "the Deployment's delete fails: done, the rest is the garbage collector's",
			cached: true, answers: map[string]answer{"DELETE deployments": unavailable},
			want: []string{"DELETE " + recordPath, dep, svc}},
		{name: "RBAC refuses: the permissions checked, the 403 names what is missing",
			cached: true, answers: map[string]answer{"DELETE configmaps": forbidden,
				"POST selfsubjectaccessreviews": {obj: &authorizationv1.SelfSubjectAccessReview{
					TypeMeta: metav1.TypeMeta{Kind: "SelfSubjectAccessReview", APIVersion: "authorization.k8s.io/v1"}}}},
			want: append([]string{"DELETE " + recordPath, dep, svc}, checks...), kind: kubeerr.KindPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, s := newScripted(t, tc.answers)
			if tc.cached {
				rec, d, v := createdX(t)
				s.wrote(rec)
				s.wrote(d)
				s.wrote(v)
			}
			err := s.Delete(context.Background(), "x")
			if got, want := api.requests(), slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
				t.Errorf("requests:\n got %q\nwant %q", got, want)
			}
			var se *kubeerr.Error
			switch {
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Errorf("Delete: %v, want %v", err, tc.err)
				}
			case tc.kind == kubeerr.KindInternal:
				if err != nil {
					t.Errorf("Delete: %v", err)
				}
			case !errors.As(err, &se) || se.Kind != tc.kind:
				t.Errorf("Delete: %v (%s), want kind %d", err, describe(se), tc.kind)
			case tc.kind == kubeerr.KindPermission && se.Message != s.Access.Describe(access.Required):
				t.Errorf("the 403 says %q", se.Message)
			}
		})
	}
}

// The record's writes after its create, each one request guarded by its UID; a record
// gone or replaced is no error.
func TestRecordWrites(t *testing.T) {
	rec := container.Record{Name: "dcm-container-x", UID: "uid-1"}
	v := &container.Service{Meta: container.Meta{Name: "web-fghij"}, UID: "uid-2"}
	for _, tc := range []struct {
		name    string
		do      func(*Store) error
		answers map[string]answer
		want    []string
		fails   bool
	}{
		{"Finalize: one patch", func(s *Store) error { return s.Finalize(context.Background(), rec) },
			nil, []string{"PATCH " + recordPath}, false},
		{"Finalize of a record gone", func(s *Store) error { return s.Finalize(context.Background(), rec) },
			map[string]answer{"PATCH configmaps": recordGone}, []string{"PATCH " + recordPath}, false},
		{"Finalize fails", func(s *Store) error { return s.Finalize(context.Background(), rec) },
			map[string]answer{"PATCH configmaps": unavailable}, []string{"PATCH " + recordPath}, true},
		{"DeleteRecord, with the Services the cache shows", func(s *Store) error {
			return s.DeleteRecord(context.Background(), rec, []*container.Service{v})
		}, nil, []string{"DELETE " + recordPath, "DELETE services/web-fghij"}, false},
		{"DeleteRecord of a record gone", func(s *Store) error { return s.DeleteRecord(context.Background(), rec, nil) },
			map[string]answer{"DELETE configmaps": recordGone}, []string{"DELETE " + recordPath}, false},
		{"DeleteRecord fails: its Services wait", func(s *Store) error {
			return s.DeleteRecord(context.Background(), rec, []*container.Service{v})
		}, map[string]answer{"DELETE configmaps": unavailable}, []string{"DELETE " + recordPath}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, s := newScripted(t, tc.answers)
			err := tc.do(s)
			if got := api.requests(); !slices.Equal(got, tc.want) {
				t.Errorf("requests %q, want %q", got, tc.want)
			}
			if (err != nil) != tc.fails {
				t.Errorf("error %v, want one: %v", err, tc.fails)
			}
		})
	}
}

// What the status controller confirms its plans with: the record by name, and the id's
// Deployments only while it lives.
func TestConfirmedRequests(t *testing.T) {
	noDeployments := answer{obj: &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{Kind: "DeploymentList", APIVersion: "apps/v1"}}}
	for _, tc := range []struct {
		name       string
		answers    map[string]answer
		want       []string
		wantRecord bool
		fails      bool
	}{
		{"no record: one read", nil, []string{"GET " + recordPath}, false, false},
		{"a terminating record: one read", map[string]answer{"GET configmaps": {obj: recordX("", deletingRecord)}},
			[]string{"GET " + recordPath}, true, false},
		{"a live record: its Deployments listed", map[string]answer{"GET configmaps": {obj: recordX("")}, "GET deployments": noDeployments},
			[]string{"GET " + recordPath, "GET deployments"}, true, false},
		{"the read fails", map[string]answer{"GET configmaps": unavailable}, []string{"GET " + recordPath}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, s := newScripted(t, tc.answers)
			snap, err := s.Confirmed(context.Background(), "x")
			if got := api.requests(); !slices.Equal(got, tc.want) {
				t.Errorf("requests %q, want %q", got, tc.want)
			}
			if (err != nil) != tc.fails || (snap.Record != nil) != tc.wantRecord {
				t.Errorf("Confirmed: %+v, %v", snap, err)
			}
		})
	}
}

// A GET that misses the cache: one read of the record, by name, before its 404.
func TestConfirmMissRequests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers map[string]answer
		err     error
		kind    kubeerr.Kind
	}{
		{"unknown: 404", nil, ErrNotFound, 0},
		{"a terminating record: 404", map[string]answer{"GET configmaps": {obj: recordX("", deletingRecord)}}, ErrNotFound, 0},
		{"the read fails: 503", map[string]answer{"GET configmaps": unavailable}, nil, kubeerr.KindUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, s := newScripted(t, tc.answers)
			_, err := s.confirmMiss(context.Background(), "x")
			if got := api.requests(); !slices.Equal(got, []string{"GET " + recordPath}) {
				t.Errorf("requests %q, want one read of the record", got)
			}
			var se *kubeerr.Error
			if tc.err != nil && !errors.Is(err, tc.err) || tc.err == nil && (!errors.As(err, &se) || se.Kind != tc.kind) {
				t.Errorf("confirmMiss: %v", err)
			}
		})
	}
}
