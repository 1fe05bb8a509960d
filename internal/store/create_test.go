package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

const recordPath = "configmaps/dcm-container-x"

var (
	unavailable  = refuse(apierrors.NewServiceUnavailable("the apiserver is restarting"))
	recordExists = refuse(apierrors.NewAlreadyExists(schema.GroupResource{Resource: "configmaps"}, "dcm-container-x"))
	recordGone   = refuse(apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "dcm-container-x"))
)

// Each way a create goes, as the exact requests it makes and what it answers: the
// record, then the Deployment and the Service at once; a failure takes the record back
// (its finalizer off, then deleted) and deletes a Service that was made, and leaves
// whatever else it owned to the garbage collector.
func TestCreateRequests(t *testing.T) {
	invalid := refuse(apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "",
		field.ErrorList{field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), "", "bad image")}))
	quota := refuse(apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "",
		errors.New("exceeded quota: q, requested: services=1, used: services=10, limited: services=10")))
	takenBack := []string{"DELETE " + recordPath, "PATCH " + recordPath}
	for _, tc := range []struct {
		name    string
		objs    container.Objects
		answers map[string]answer
		want    []string
		kind    kubeerr.Kind // of the error; KindInternal: none
		fields  int          // violations the error names
	}{
		{name: "without a Service: the record, then the Deployment", objs: objectsX(false, ""),
			want: []string{"POST configmaps", "POST deployments"}},
		{name: "with a Service: the record, then both at once", objs: objectsX(true, ""),
			want: []string{"POST configmaps", "POST deployments", "POST services"}},
		{name: "the Deployment refused: the record taken back, the Service deleted", objs: objectsX(true, ""),
			answers: map[string]answer{"POST deployments": invalid},
			want:    append([]string{"DELETE services/web-x1", "POST configmaps", "POST deployments", "POST services"}, takenBack...),
			kind:    kubeerr.KindInvalid, fields: 1},
		{name: "the Service refused by a quota: the record taken back, the Deployment left to the garbage collector", objs: objectsX(true, ""),
			answers: map[string]answer{"POST services": quota},
			want:    append([]string{"POST configmaps", "POST deployments", "POST services"}, takenBack...),
			kind:    kubeerr.KindQuota, fields: 1},
		{name: "no answer to the Deployment, no key: taken back", objs: objectsX(false, ""),
			answers: map[string]answer{"POST deployments": unavailable},
			want:    append([]string{"POST configmaps", "POST deployments"}, takenBack...),
			kind:    kubeerr.KindUnavailable},
		{name: "no answer to the Deployment, with a key: the record kept for the retry", objs: objectsX(false, "k1"),
			answers: map[string]answer{"POST deployments": unavailable},
			want:    []string{"POST configmaps", "POST deployments"},
			kind:    kubeerr.KindUnavailable},
		{name: "the record's create refused: nothing else", objs: objectsX(true, ""),
			answers: map[string]answer{"POST configmaps": unavailable},
			want:    []string{"POST configmaps"},
			kind:    kubeerr.KindUnavailable},
		{name: "the id is another container's: one read of its record", objs: objectsX(false, ""),
			answers: map[string]answer{"POST configmaps": recordExists, "GET configmaps": {obj: recordX("")}},
			want:    []string{"GET " + recordPath, "POST configmaps"},
			kind:    kubeerr.KindConflict},
		{name: "the id's previous container is being deleted", objs: objectsX(false, ""),
			answers: map[string]answer{"POST configmaps": recordExists, "GET configmaps": {obj: recordX("", deletingRecord)}},
			want:    []string{"GET " + recordPath, "POST configmaps"},
			kind:    kubeerr.KindDeleting},
		{name: "the key again, with another spec", objs: objectsX(false, "k1"),
			answers: map[string]answer{"POST configmaps": recordExists, "GET configmaps": {obj: recordX("k1", func(c *corev1.ConfigMap) {
				c.Annotations[container.AnnotationRequestDigest] = "d2"
			})}},
			want: []string{"GET " + recordPath, "POST configmaps"},
			kind: kubeerr.KindKeyReused},
		{name: "the key again, its container being deleted: 503", objs: objectsX(false, "k1"),
			answers: map[string]answer{"POST configmaps": recordExists, "GET configmaps": {obj: recordX("k1", deletingRecord)}},
			want:    []string{"GET " + recordPath, "POST configmaps"},
			kind:    kubeerr.KindUnavailable},
		{name: "a record that holds the id and is gone by the read: created once more", objs: objectsX(false, ""),
			answers: map[string]answer{"POST configmaps": recordExists},
			want:    []string{"GET " + recordPath, "GET " + recordPath, "POST configmaps", "POST configmaps"},
			kind:    kubeerr.KindConflict},
		{name: "the record's read fails", objs: objectsX(false, ""),
			answers: map[string]answer{"POST configmaps": recordExists, "GET configmaps": unavailable},
			want:    []string{"GET " + recordPath, "POST configmaps"},
			kind:    kubeerr.KindUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, s := newScripted(t, tc.answers)
			obs, err := s.Create(context.Background(), "x", tc.objs)
			if got, want := api.requests(), slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
				t.Errorf("requests:\n got %q\nwant %q", got, want)
			}
			if tc.kind == kubeerr.KindInternal {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				if obs.Deployment.Name != "web-x1" || (tc.objs.Service != nil) != (obs.Service != nil) {
					t.Errorf("Create answered %+v", obs)
				}
				if _, ok := s.Snapshot("x").Observed(); !ok {
					t.Error("the create's own objects are not read back before it answers")
				}
				return
			}
			var se *kubeerr.Error
			if !errors.As(err, &se) || se.Kind != tc.kind || len(se.Fields) != tc.fields {
				t.Fatalf("Create: %v (%s), want kind %d with %d violations", err, describe(se), tc.kind, tc.fields)
			}
		})
	}
}

func describe(se *kubeerr.Error) string {
	if se == nil {
		return "not a kubeerr.Error"
	}
	return fmt.Sprintf("kind %d, violations %v", se.Kind, se.Fields)
}
