package store

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCachedBytes reports what one cached Pod and one cached Deployment cost in the
// informer caches (decoded from JSON as an informer would, then stripped and interned):
// go test -run '^$' -bench CachedBytes ./internal/store
func BenchmarkCachedBytes(b *testing.B) {
	const n = 10000
	now := metav1.NewTime(time.Now())
	mkPod := func(i int) *corev1.Pod {
		l := container.SystemLabels(fmt.Sprintf("id-%05d", i))
		l[container.LabelIncarnation] = "0b3c5a6e-6f5e-4c9d-8f7e-0a1b2c3d4e5f"
		l["pod-template-hash"] = "5d8f7b9c6"
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%05d-5d8f7b9c6-abcde", i), GenerateName: "web-5d8f7b9c6-",
			Namespace: "dcm-containers", UID: types.UID(fmt.Sprintf("0b3c5a6e-6f5e-4c9d-8f7e-%012d", i)), ResourceVersion: "123456789", Labels: l, CreationTimestamp: now,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7b9c6", UID: "x"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.23", Conditions: []corev1.PodCondition{
				{Type: "PodReadyToStartContainers", Status: "True", LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: "True", LastTransitionTime: now},
				{Type: corev1.PodReady, Status: "True", LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: "True", LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: "True", LastTransitionTime: now}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Started: new(bool), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}}
	}
	var keep []any
	h0 := liveHeap()
	for i := range n {
		raw, _ := json.Marshal(mkPod(i))
		var p corev1.Pod
		_ = json.Unmarshal(raw, &p)
		o, _ := stripForCache(&p)
		keep = append(keep, o)
	}
	h1 := liveHeap()
	b.ReportMetric(float64(h1-h0)/n, "pod-bytes")
	var deps []any
	for i := range n {
		p := mkPod(i)
		d := &appsv1.Deployment{ObjectMeta: p.ObjectMeta}
		d.Annotations = map[string]string{container.AnnotationResources: `{"cpu":{"max":2,"min":1},"memory":{"max":"128MB","min":"64MB"}}`}
		d.Spec.Replicas = new(int32)
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: "quay.io/example/web:v1"}}
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: "Available", Status: "True", Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: "Progressing", Status: "True", Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-5d8f7b9c6" has successfully progressed.`, LastUpdateTime: now, LastTransitionTime: now}}
		raw, _ := json.Marshal(d)
		var dd appsv1.Deployment
		_ = json.Unmarshal(raw, &dd)
		o, _ := stripForCache(&dd)
		deps = append(deps, o)
	}
	h2 := liveHeap()
	b.ReportMetric(float64(h2-h1)/n, "deployment-bytes")
	runtime.KeepAlive(keep)
	runtime.KeepAlive(deps)
}
