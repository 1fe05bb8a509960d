package cached

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The compact cached objects give back exactly the views they were made from, in the
// corners the packing and the pieces of compact.go have: nil against empty lists, ids
// that are not UUIDs, a name that does not start with its generateName, unset times
// and quantities, every message of a pod.
func TestCompactGivesTheViewBack(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	meta := func(inc string) container.Meta {
		return container.Meta{Name: "web-x7k2p", Namespace: "ns", Created: at, ID: "abc", Incarnation: inc}
	}
	var cpu v1alpha1.CpuQuantity
	_ = cpu.FromCpuQuantity1("250m")
	three := int32(3)
	deployments := map[string]container.Deployment{
		"empty":             {},
		"uuid incarnation":  {Meta: meta("0b3c5a6e-6f5e-4c9d-8f7e-000000000001"), GenerateName: "web-"},
		"other incarnation": {Meta: meta("inc-1"), GenerateName: "other-"},
		"nil uuid":          {Meta: meta("00000000-0000-0000-0000-000000000000")},
		"upper-case uuid":   {Meta: meta("0B3C5A6E-6F5E-4C9D-8F7E-000000000001")},
		"full": {Meta: meta("inc-1"), GenerateName: "web-", Replicas: &three,
			Container: container.Container{Name: "web", Image: "nginx:1", Command: []string{}, Args: []string{"", "-v"},
				Env: []container.EnvVar{{Name: "A", Value: ""}, {Name: "B", Value: "x\x00y"}}, Ports: []int32{80, 65535}},
			Resources: v1alpha1.ContainerResources{Cpu: v1alpha1.CpuRange{Min: cpu}, Memory: v1alpha1.MemoryRange{Min: "64MB"}},
			Available: container.Condition{Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", Message: "no"},
			Changed:   at.Add(time.Second)},
		"no env, no ports, empty env": {Container: container.Container{Env: []container.EnvVar{}, Ports: []int32{}}},
		"being deleted":               {Meta: container.Meta{Name: "web-x7k2p", Deleting: true}, GenerateName: "web-"},
	}
	for name, d := range deployments {
		if got := newCachedDeployment(d, "1").view(d.Namespace, d.ID); !sameView(got, d) {
			t.Errorf("deployment %s: read back as %+v, want %+v", name, got, d)
		}
	}
	pods := map[string]container.Pod{
		"empty":   {},
		"running": {Meta: meta("inc-1"), Phase: corev1.PodRunning, IP: "10.0.0.1", Ready: corev1.ConditionTrue, Container: &container.ContainerStatus{Ready: true, Running: true}},
		"every message": {Meta: meta("inc-1"), Phase: corev1.PodPending, Reason: "Evicted", Message: "low on memory",
			NotScheduled: &container.Reason{Reason: "Unschedulable", Message: "0/3 nodes"},
			Container: &container.ContainerStatus{Restarts: 7, Waiting: &container.Reason{Reason: "CrashLoopBackOff", Message: "back-off pod=web"},
				Terminated: &container.Exit{Reason: "Error", Message: "boom", Code: -1}, LastExit: &container.Exit{Reason: "OOMKilled", Code: 137}},
			ReadinessGates: true, Changed: at},
		"being deleted, no IP": {Meta: container.Meta{Name: "p", Deleting: true}, Phase: corev1.PodRunning},
	}
	for name, p := range pods {
		if got := newCachedPod(p, "1").view(p.Namespace, p.ID); !sameView(got, p) {
			t.Errorf("pod %s: read back as %+v, want %+v", name, got, p)
		}
	}
	services := map[string]container.Service{
		"empty": {},
		"full": {Meta: meta("inc-1"), UID: "0b3c5a6e-6f5e-4c9d-8f7e-000000000002", Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.9",
			Ports:      []container.ServicePort{{Port: 80, TargetPort: 8080, NodePort: 30001, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}},
			ExternalIP: "lb.example.com"},
		"no ports, odd uid": {UID: "uid-9", Ports: []container.ServicePort{}},
		"being deleted":     {Meta: container.Meta{Name: "s", Deleting: true}, Type: corev1.ServiceTypeClusterIP, ClusterIP: "None"},
	}
	for name, s := range services {
		if got := newCachedService(s, "1").view(s.Namespace, s.ID); !sameView(got, s) {
			t.Errorf("service %s: read back as %+v, want %+v", name, got, s)
		}
	}
}
