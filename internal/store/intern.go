package store

import (
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every cached object is decoded on its own, so each carries its own copy of strings
// that are the same in thousands of objects: the namespace, label keys and most label
// values, condition types, reasons and messages, images. Interning them (Go's unique
// package: one copy per distinct value, dropped when no object uses it any more) keeps
// one copy. Values unique to one object (names, UIDs, resource versions) are left as
// they are.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	m.GenerateName = intern(m.GenerateName)
	m.Labels = internMap(m.Labels)
	m.Annotations = internMap(m.Annotations)
	for i := range m.Finalizers {
		m.Finalizers[i] = intern(m.Finalizers[i])
	}
}

func internMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[intern(k)] = intern(v)
	}
	return out
}

func internPod(p *corev1.Pod) {
	internMeta(&p.ObjectMeta)
	s := &p.Status
	s.Phase = corev1.PodPhase(intern(string(s.Phase)))
	s.Reason, s.Message = intern(s.Reason), intern(s.Message)
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status = corev1.PodConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status)))
		c.Reason, c.Message = intern(c.Reason), intern(c.Message)
	}
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		cs.Name = intern(cs.Name)
		for _, st := range []*corev1.ContainerState{&cs.State, &cs.LastTerminationState} {
			if w := st.Waiting; w != nil {
				w.Reason, w.Message = intern(w.Reason), intern(w.Message)
			}
			if t := st.Terminated; t != nil {
				t.Reason, t.Message = intern(t.Reason), intern(t.Message)
			}
		}
	}
}

func internDeployment(d *appsv1.Deployment) {
	internMeta(&d.ObjectMeta)
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		c.Name, c.Image = intern(c.Name), intern(c.Image)
	}
	for i := range d.Status.Conditions {
		c := &d.Status.Conditions[i]
		c.Type, c.Status = appsv1.DeploymentConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status)))
		c.Reason, c.Message = intern(c.Reason), intern(c.Message)
	}
}

func internService(s *corev1.Service) {
	internMeta(&s.ObjectMeta)
	s.Spec.Type = corev1.ServiceType(intern(string(s.Spec.Type)))
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		p.Name, p.Protocol = intern(p.Name), corev1.Protocol(intern(string(p.Protocol)))
	}
}
