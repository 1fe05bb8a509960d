package store

import (
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The slim cached objects give exactly the same API resource and status as the full
// ones: the transform drops nothing a reader uses.
func TestSlimObjectsReadTheSame(t *testing.T) {
	var c v1alpha1.Container
	body := `{"spec":{"service_type":"container","metadata":{"name":"web","labels":{"team":"a"}},"image":{"reference":"nginx:1"},
	  "resources":{"cpu":{"min":"500m","max":2},"memory":{"min":"64MB","max":"1GB"}},
	  "process":{"command":["/x"],"args":["-v"],"env":[{"name":"A","value":"1"}]},
	  "network":{"ports":[{"container_port":80,"visibility":"external"},{"container_port":81,"visibility":"none"}]}}}`
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	objs, err := container.Build("abc", &c.Spec, container.Options{Namespace: "ns", ExternalServiceType: corev1.ServiceTypeLoadBalancer})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := objs.Deployment
	d.Name, d.UID, d.CreationTimestamp = "web-x", "uid-1", now
	d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	// An earlier version's ties: the cache keeps them, the reporter removes them.
	d.OwnerReferences = []metav1.OwnerReference{{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Name: "dcm-container-abc", UID: "l1"}}
	d.Finalizers = []string{container.LegacyFinalizer}
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastTransitionTime: now}}
	svc := objs.Service
	svc.Name, svc.Spec.ClusterIP = "web-y", "10.96.0.9"
	svc.Spec.Ports[0].NodePort = 30001
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.1"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: d.Spec.Template.Labels, CreationTimestamp: now},
		Spec:       d.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.3", Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(time.Minute))}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Image: "nginx:1", ImageID: "sha", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}},
	}
	full := container.ToAPI(container.Observed{Deployment: d, Service: svc, Pods: []*corev1.Pod{pod}})
	sd, _ := stripForCache(d.DeepCopy())
	ss, _ := stripForCache(svc.DeepCopy())
	sp, _ := stripForCache(pod.DeepCopy())
	slim := container.ToAPI(container.Observed{Deployment: sd.(*appsv1.Deployment), Service: ss.(*corev1.Service), Pods: []*corev1.Pod{sp.(*corev1.Pod)}})
	a, _ := json.Marshal(full)
	b, _ := json.Marshal(slim)
	if string(a) != string(b) {
		t.Errorf("slim objects read differently:\nfull %s\nslim %s", a, b)
	}
	if dd := sd.(*appsv1.Deployment); len(dd.ManagedFields) != 0 || len(dd.Finalizers) != 1 || len(dd.OwnerReferences) != 1 {
		t.Errorf("slim deployment meta: %+v", dd.ObjectMeta)
	}
}
