package container

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRecordOf(t *testing.T) {
	now := metav1.Now()
	mk := func(edit func(*coordinationv1.Lease)) *coordinationv1.Lease {
		l := NewRecord("web", "i1", false)
		l.UID = "u1"
		edit(l)
		return l
	}
	for _, tc := range []struct {
		name  string
		lease *coordinationv1.Lease
		ok    bool
		want  Record
	}{
		{"a record", mk(func(*coordinationv1.Lease) {}), true, Record{Name: "dcm-container-web", UID: "u1", Incarnation: "i1"}},
		{"owed, being deleted", mk(func(l *coordinationv1.Lease) {
			l.Finalizers = []string{RecordFinalizer}
			l.DeletionTimestamp = &now
		}), true, Record{Name: "dcm-container-web", UID: "u1", Incarnation: "i1", Owed: true, Terminating: true}},
		{"a bare reservation (no record label, no incarnation)", mk(func(l *coordinationv1.Lease) {
			l.Labels = map[string]string{LabelManagedBy: ManagedByValue, LabelInstanceID: "web"}
		}), true, Record{Name: "dcm-container-web", UID: "u1"}},
		{"right name, not ours (no labels): never touched", mk(func(l *coordinationv1.Lease) { l.Labels = nil }), false, Record{}},
		{"right name, another id's labels", mk(func(l *coordinationv1.Lease) { l.Labels[LabelInstanceID] = "other" }), false, Record{}},
		{"right labels, another name (e.g. a leader Lease)", mk(func(l *coordinationv1.Lease) { l.Name = "sp-status" }), false, Record{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RecordOf(tc.lease, "web")
			got.Created = Record{}.Created
			if ok != tc.ok || got != tc.want {
				t.Errorf("RecordOf = %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
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
