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
		c := NewRecord("web", "i1", false)
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
		{"a record", mk(func(*corev1.ConfigMap) {}), true, Record{Name: "dcm-container-web", UID: "u1", Incarnation: "i1"}},
		{"owed, being deleted", mk(func(c *corev1.ConfigMap) {
			c.Finalizers = []string{RecordFinalizer}
			c.DeletionTimestamp = &now
		}), true, Record{Name: "dcm-container-web", UID: "u1", Incarnation: "i1", Owed: true, Terminating: true}},
		{"a bare reservation (no record label, no incarnation)", mk(func(c *corev1.ConfigMap) {
			c.Labels = map[string]string{LabelManagedBy: ManagedByValue, LabelInstanceID: "web"}
		}), true, Record{Name: "dcm-container-web", UID: "u1"}},
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
	for _, owed := range []bool{false, true} {
		c := NewRecord("web", "i1", owed)
		if !sel.Matches(labels.Set(c.Labels)) {
			t.Errorf("owed=%v: %v not selected by %s", owed, c.Labels, RecordSelector)
		}
		if len(c.Data) != 0 || len(c.BinaryData) != 0 {
			t.Errorf("owed=%v: a record carries no data: %v", owed, c.Data)
		}
		if got := slices.Contains(c.Finalizers, RecordFinalizer); got != owed {
			t.Errorf("owed=%v: finalizers %v", owed, c.Finalizers)
		}
	}
}

func TestForIncarnationStampsLabelsAndSelectors(t *testing.T) {
	objs := Objects{
		Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Labels: SystemLabels("web")},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstanceID: "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: SystemLabels("web")}}},
		},
		Service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Labels: SystemLabels("web")},
			Spec: corev1.ServiceSpec{Selector: map[string]string{LabelInstanceID: "web"}}},
	}
	out := objs.ForIncarnation("i9")
	for what, m := range map[string]map[string]string{
		"Deployment": out.Deployment.Labels, "selector": out.Deployment.Spec.Selector.MatchLabels,
		"pod template": out.Deployment.Spec.Template.Labels, "Service": out.Service.Labels, "Service selector": out.Service.Spec.Selector,
	} {
		if m[LabelIncarnation] != "i9" {
			t.Errorf("%s: %v", what, m)
		}
	}
	if _, ok := objs.Deployment.Labels[LabelIncarnation]; ok {
		t.Error("the input was changed")
	}
}
