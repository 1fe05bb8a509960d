package store

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// served is one container's objects as the apiserver returns them: built by the
// service's own mapping, then given what the apiserver, the controllers and the kubelet
// add (uid, resourceVersion, defaults, status, the pod).
func served(i int, now metav1.Time) []any {
	return servedSpec(i, now, typicalSpec())
}

// typicalSpec is a container as the bench makes them: a few labels and env vars.
func typicalSpec() *v1alpha1.ContainerSpec {
	spec := &v1alpha1.ContainerSpec{
		Metadata: v1alpha1.ContainerMetadata{Name: "web", Labels: &map[string]string{"team": "payments", "env": "prod"}},
		Image:    v1alpha1.ContainerImage{Reference: "quay.io/example/web:v1.2.3"},
		Process:  &v1alpha1.ContainerProcess{Env: &[]v1alpha1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "PORT", Value: "8080"}}},
		Network:  &v1alpha1.ContainerNetwork{Ports: &[]v1alpha1.ContainerPort{{ContainerPort: 8080, Visibility: v1alpha1.ContainerPortVisibilityInternal}}},
	}
	_ = spec.Resources.Cpu.Min.FromCpuQuantity0(1)
	_ = spec.Resources.Cpu.Max.FromCpuQuantity0(2)
	spec.Resources.Memory.Min, spec.Resources.Memory.Max = "64MB", "128MB"
	return spec
}

// servedSpec is served for a given spec.
func servedSpec(i int, now metav1.Time, spec *v1alpha1.ContainerSpec) []any {
	id := fmt.Sprintf("bench-%05d", i)
	inc := fmt.Sprintf("0b3c5a6e-6f5e-4c9d-8f7e-%012d", i)
	objs, err := container.Build(id, spec, container.Options{Namespace: "dcm-containers", PodSecurity: container.Baseline})
	if err != nil {
		panic(err)
	}
	objs = objs.OwnedBy(container.RecordName(id), types.UID(inc))
	server := func(m *metav1.ObjectMeta, name string, n int) {
		m.Name, m.Namespace = name, "dcm-containers"
		m.UID = types.UID(fmt.Sprintf("0b3c5a6e-6f5e-4c9d-%04d-%012d", n, i))
		m.ResourceVersion, m.CreationTimestamp = fmt.Sprint(100000+i), now
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "k8s-container-sp", Operation: "Update", APIVersion: "v1", Time: &now}}
	}
	d := objs.Deployment
	server(&d.ObjectMeta, fmt.Sprintf("web-%05d", i), 1)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: "Available", Status: "True", Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: "Progressing", Status: "True", Reason: "NewReplicaSetAvailable", Message: fmt.Sprintf(`ReplicaSet "web-%05d-5d8f7b9c6" has successfully progressed.`, i), LastUpdateTime: now, LastTransitionTime: now}}}
	s := objs.Service
	server(&s.ObjectMeta, fmt.Sprintf("web-%05d", i), 2)
	s.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/250, i%250)
	s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	s.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	pod := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
	server(&pod.ObjectMeta, fmt.Sprintf("web-%05d-5d8f7b9c6-abcde", i), 3)
	pod.GenerateName = fmt.Sprintf("web-%05d-5d8f7b9c6-", i)
	pod.Labels["pod-template-hash"] = "5d8f7b9c6"
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7b9c6", UID: "x"}}
	pod.Spec.NodeName = "kwok-node-1"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.%d.%d", i/250, i%250), HostIP: "10.0.0.1", StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: "PodReadyToStartContainers", Status: "True", LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: "True", LastTransitionTime: now},
			{Type: corev1.PodReady, Status: "True", LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: "True", LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: "True", LastTransitionTime: now}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Started: new(bool), Image: "quay.io/example/web:v1.2.3",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	rec := container.NewRecord(id, container.Request{})
	server(&rec.ObjectMeta, container.RecordName(id), 4)
	rec.UID = types.UID(inc)
	return []any{d, pod, s, rec}
}

// decoded round-trips obj through JSON, as a reflector receives it.
func decoded(obj any) any {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	var out any
	switch obj.(type) {
	case *appsv1.Deployment:
		out = &appsv1.Deployment{}
	case *corev1.Pod:
		out = &corev1.Pod{}
	case *corev1.Service:
		out = &corev1.Service{}
	case *corev1.ConfigMap:
		out = &corev1.ConfigMap{}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		panic(err)
	}
	return out
}

// BenchmarkCacheBytesPerContainer reports what one container costs in the store's
// caches, kind by kind and in all: its objects as the apiserver serves them, decoded,
// and put in the store's informers as their watches put them. The id is counted with the
// Deployment (the first kind put).
// go test -run '^$' -bench CacheBytesPerContainer ./internal/store
func BenchmarkCacheBytesPerContainer(b *testing.B) {
	cacheBytes(b, 10000, typicalSpec())
}

// cacheBytes fills a Store with n containers of spec, one kind after the other, and
// reports the heap each kind added per container, and the total.
func cacheBytes(b *testing.B, n int, spec *v1alpha1.ContainerSpec) float64 {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	s := emptyStore(b)
	var total uint64
	for k, name := range []string{"deployment", "pod", "service", "record"} {
		h0 := liveHeap()
		for i := range n {
			if err := s.put(kind(k), decoded(servedSpec(i, now, spec)[k])); err != nil {
				b.Fatal(err)
			}
		}
		h1 := liveHeap()
		total += h1 - h0
		b.ReportMetric(float64(h1-h0)/float64(n), name+"-B")
	}
	per := float64(total) / float64(n)
	b.ReportMetric(per, "container-B")
	runtime.KeepAlive(s)
	return per
}

// maxSizedSpec is the typical container with env values added until its Kubernetes
// objects are as large as limit allows (container.ObjectBytes at most limit, within 64
// bytes of it): the largest container a create accepts.
func maxSizedSpec(limit int) *v1alpha1.ContainerSpec {
	spec := typicalSpec()
	size := func() int {
		objs, err := container.Build("bench-00000", spec, container.Options{Namespace: "dcm-containers", PodSecurity: container.Baseline})
		if err != nil {
			panic(err)
		}
		n, err := container.ObjectBytes(objs)
		if err != nil {
			panic(err)
		}
		return n
	}
	env := *spec.Process.Env
	spec.Process.Env = &env
	for i := 0; len(env) < container.MaxEnv; i++ {
		room := limit - size() - len(`,{"name":"FILL_000","value":""}`)
		if room <= 64 {
			break
		}
		env = append(env, v1alpha1.EnvVar{Name: fmt.Sprintf("FILL_%03d", i), Value: strings.Repeat("x", min(room, container.MaxEnvValue))})
		*spec.Process.Env = env
	}
	if n := size(); n > limit || n < limit-64-len(`,{"name":"FILL_000","value":""}`) {
		panic(fmt.Sprintf("a max-size container of %d bytes for a limit of %d", n, limit))
	}
	return spec
}

// BenchmarkCacheBytesPerMaxSizeContainer is BenchmarkCacheBytesPerContainer for the
// largest containers a create accepts, at a few per-container limits (SP_CONTAINER_MAX_BYTES):
// what each costs in the caches at most, so what SP_MAX_CONTAINERS of them cost.
// go test -run '^$' -bench CacheBytesPerMaxSizeContainer -benchtime 1x ./internal/store
func BenchmarkCacheBytesPerMaxSizeContainer(b *testing.B) {
	for _, limit := range []int{8 << 10, 16 << 10, 64 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("%dKiB", limit>>10), func(b *testing.B) {
			n := (64 << 20) / limit // about 64 MiB of objects whatever the limit
			per := cacheBytes(b, n, maxSizedSpec(limit))
			b.ReportMetric(per/float64(limit), "B/limit-B")
		})
	}
}
