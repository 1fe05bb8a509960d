package container

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLabelsRoundTrip(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"nil":          nil,
		"empty":        {},
		"empty values": {"a": "", "b": ""},
		"several":      {"team": "a", "example.com/tier": "web", "x": "y.z-1"},
	} {
		got := labelsOf(m).Map()
		if got == nil || !maps.Equal(got, m) {
			t.Errorf("%s: %v, want %v", name, got, m)
		}
	}
	if labelsOf(map[string]string{"a": "1", "b": "2"}) != labelsOf(map[string]string{"b": "2", "a": "1"}) {
		t.Error("equal label sets are not one value")
	}
}

// PodOf keeps of the conditions what StatusOf reads, chosen as StatusOf chose them from
// the pod: the last Ready and ContainersReady, the first PodScheduled=False; and the
// newest transition of all.
func TestPodOfConditions(t *testing.T) {
	at := func(m int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(m) * time.Minute)) }
	cond := func(typ corev1.PodConditionType, s corev1.ConditionStatus, reason string, m int) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: s, Reason: reason, LastTransitionTime: at(m)}
	}
	cases := []struct {
		name                   string
		conds                  []corev1.PodCondition
		states                 []corev1.ContainerState
		ready, containersReady corev1.ConditionStatus
		notScheduled           string // reason; "-" for none
		changed                int    // minutes after t0
	}{
		{"none", nil, nil, "", "", "-", 0},
		{"the last of a type counts", []corev1.PodCondition{cond(corev1.PodReady, "True", "", 1), cond(corev1.PodReady, "False", "", 2),
			cond(corev1.ContainersReady, "True", "", 3)}, nil, "False", "True", "-", 3},
		{"the first unscheduled counts", []corev1.PodCondition{cond(corev1.PodScheduled, "True", "ok", 1),
			cond(corev1.PodScheduled, "False", "first", 5), cond(corev1.PodScheduled, "False", "second", 2)}, nil, "", "", "first", 5},
		{"container starts and exits count, of every container", nil, []corev1.ContainerState{
			{Running: &corev1.ContainerStateRunning{StartedAt: at(4)}},
			{Terminated: &corev1.ContainerStateTerminated{FinishedAt: at(7)}}}, "", "", "-", 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(0)}, Status: corev1.PodStatus{Conditions: tc.conds}}
			for _, s := range tc.states {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{State: s})
			}
			v := PodOf(p)
			notScheduled := "-"
			if v.NotScheduled != nil {
				notScheduled = v.NotScheduled.Reason
			}
			if v.Ready != tc.ready || v.ContainersReady != tc.containersReady || notScheduled != tc.notScheduled || !v.Changed.Equal(at(tc.changed).Time) {
				t.Errorf("ready %q containers ready %q not scheduled %q changed %v", v.Ready, v.ContainersReady, notScheduled, v.Changed)
			}
			if (v.Container == nil) != (len(tc.states) == 0) {
				t.Errorf("container status %+v", v.Container)
			}
		})
	}
}

// A Deployment's resources are what the client sent; without the annotation (or with
// one that does not parse) they are derived from the container's requests and limits.
func TestDeploymentOfResources(t *testing.T) {
	requirements := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	const derived = `{"cpu":{"max":"1","min":"250m"},"memory":{"max":"1GB","min":"64MB"}}`
	for _, tc := range []struct {
		name, annotation string
		has              bool
		want             string
	}{
		{"as sent", `{"cpu":{"min":1,"max":"2"},"memory":{"min":"512MB","max":"2GB"}}`, true, `{"cpu":{"max":"2","min":1},"memory":{"max":"2GB","min":"512MB"}}`},
		{"no annotation", "", false, derived},
		{"an annotation that does not parse", `{"cpu":{"min":1}, nope`, true, derived},
		{"an annotation of another shape", `{"cpu":{"min":1},"memory":{"min":5}}`, true, derived},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{}
			d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Resources: requirements}}
			if tc.has {
				d.Annotations = map[string]string{AnnotationResources: tc.annotation}
			}
			if b, _ := json.Marshal(DeploymentOf(d).Resources); string(b) != tc.want {
				t.Errorf("resources %s, want %s", b, tc.want)
			}
		})
	}
}

func TestServiceOfExternalIP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ingress []corev1.LoadBalancerIngress
		want    string
	}{
		{"none", nil, ""},
		{"an IP", []corev1.LoadBalancerIngress{{IP: "203.0.113.1", Hostname: "lb"}}, "203.0.113.1"},
		{"a host name", []corev1.LoadBalancerIngress{{Hostname: "lb.example"}, {IP: "1.2.3.4"}}, "lb.example"},
		{"the first ingress only", []corev1.LoadBalancerIngress{{}, {IP: "1.2.3.4"}}, ""},
	} {
		s := &corev1.Service{}
		s.Status.LoadBalancer.Ingress = tc.ingress
		if got := ServiceOf(s).ExternalIP; got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
