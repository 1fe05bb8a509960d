package container

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestRecordOf(t *testing.T) {
	now := metav1.Now()
	mk := func(edit func(*corev1.ConfigMap)) metav1.Object {
		c := NewRecord("web", Request{})
		c.UID = "u1"
		edit(c)
		return c
	}
	for _, tc := range []struct {
		name string
		obj  metav1.Object
		ok   bool
		want Record
	}{
		{"a record, as a create writes it: owed from the start", mk(func(*corev1.ConfigMap) {}), true, Record{Name: "dcm-container-web", UID: "u1", Owed: true}},
		{"deleted, its DELETED not delivered", mk(func(c *corev1.ConfigMap) { c.DeletionTimestamp = &now }),
			true, Record{Name: "dcm-container-web", UID: "u1", Owed: true, Terminating: true}},
		{"deleted, finalized (the garbage collector's own finalizer keeps it)", mk(func(c *corev1.ConfigMap) {
			c.DeletionTimestamp = &now
			c.Finalizers = []string{metav1.FinalizerDeleteDependents}
		}), true, Record{Name: "dcm-container-web", UID: "u1", Terminating: true}},
		{"right name, not ours (no labels): never touched", mk(func(c *corev1.ConfigMap) { c.Labels = nil }), false, Record{}},
		{"right name, another id's labels", mk(func(c *corev1.ConfigMap) { c.Labels[LabelInstanceID] = "other" }), false, Record{}},
		{"right labels, another name (e.g. the leader ConfigMap)", mk(func(c *corev1.ConfigMap) { c.Name = "sp-status" }), false, Record{}},
		{"no object (a failed Get's nil)", (*corev1.ConfigMap)(nil), false, Record{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RecordOf(tc.obj, "web")
			got.Created = Record{}.Created
			if ok != tc.ok || got != tc.want {
				t.Errorf("RecordOf = %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNewRecordIsSelectedByRecordSelector(t *testing.T) {
	sel, err := labels.Parse(RecordSelector)
	if err != nil {
		t.Fatal(err)
	}
	c := NewRecord("web", Request{})
	if !sel.Matches(labels.Set(c.Labels)) {
		t.Errorf("%v not selected by %s", c.Labels, RecordSelector)
	}
	if len(c.Data) != 0 || len(c.BinaryData) != 0 {
		t.Errorf("a record carries no data: %v", c.Data)
	}
	if !slices.Equal(c.Finalizers, []string{RecordFinalizer}) {
		t.Errorf("finalizers %v, want only %s", c.Finalizers, RecordFinalizer)
	}
}

func TestOwnedByOwnsAndSelectsOnTheIncarnation(t *testing.T) {
	objs := Objects{
		Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Labels: SystemLabels("web")},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstanceID: "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: SystemLabels("web")}}},
		},
		Service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Labels: SystemLabels("web")},
			Spec: corev1.ServiceSpec{Selector: map[string]string{LabelInstanceID: "web"}}},
		Request: Request{Key: "k", Digest: "d"},
	}
	out := objs.OwnedBy("dcm-container-web", "u9")
	if out.Request != objs.Request {
		t.Errorf("the request that asked for them: %+v", out.Request)
	}
	for what, m := range map[string]map[string]string{
		"selector": out.Deployment.Spec.Selector.MatchLabels, "pod template": out.Deployment.Spec.Template.Labels, "Service selector": out.Service.Spec.Selector,
	} {
		if m[LabelIncarnation] != "u9" {
			t.Errorf("%s: %v", what, m)
		}
	}
	for what, o := range map[string]metav1.Object{"Deployment": out.Deployment, "Service": out.Service} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "ConfigMap" || refs[0].Name != "dcm-container-web" || refs[0].UID != "u9" ||
			refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion != nil {
			t.Errorf("%s: ownerReferences %+v", what, refs)
		}
		if got := IncarnationOf(o); got != "u9" {
			t.Errorf("%s: incarnation %q, want the record's UID", what, got)
		}
		if _, ok := o.GetLabels()[LabelIncarnation]; ok {
			t.Errorf("%s: an incarnation label beside the ownerReference: %v", what, o.GetLabels())
		}
	}
	if len(objs.Deployment.OwnerReferences) != 0 || objs.Deployment.Spec.Template.Labels[LabelIncarnation] != "" {
		t.Error("the input was changed")
	}
}

func TestIncarnationOfAPodIsItsLabel(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelIncarnation: "u9"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", UID: "rs", Controller: ptrTo(true)}}}}
	if got := IncarnationOf(pod); got != "u9" {
		t.Errorf("incarnation %q, want the label's", got)
	}
}
