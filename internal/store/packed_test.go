package store

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// through puts obj through the cache as an informer would (transform, then keyed and
// indexed), and reads it back as byIndex does.
func through[T any](t *testing.T, obj T) T {
	t.Helper()
	idx := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{IndexByInstance: indexByInstance})
	packed, err := packForCache(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Add(packed); err != nil {
		t.Fatal(err)
	}
	m := any(obj).(metav1.Object)
	if _, ok, _ := idx.GetByKey(m.GetNamespace() + "/" + m.GetName()); !ok {
		t.Fatalf("packed %s not found by its key", m.GetName())
	}
	inf := fakeInformer{idx}
	got := byIndex[T](inf, container.InstanceID(m.GetLabels()))
	if len(got) != 1 {
		t.Fatalf("byIndex found %d objects", len(got))
	}
	return got[0]
}

type fakeInformer struct{ idx cache.Indexer }

func (f fakeInformer) GetIndexer() cache.Indexer { return f.idx }

func testContainer(t *testing.T, body string) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	var c v1alpha1.Container
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	objs, err := container.Build("abc", &c.Spec, container.Options{Namespace: "ns", ExternalServiceType: corev1.ServiceTypeLoadBalancer})
	if err != nil {
		t.Fatal(err)
	}
	objs = objs.ForIncarnation("inc-1")
	return objs.Deployment, objs.Service
}

// Packed objects read exactly like the objects the apiserver served: the same API
// resource, the same status, the same identity. Each case is something a reader
// distinguishes.
func TestPackedObjectsReadTheSame(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(now.Add(time.Minute))
	body := `{"spec":{"service_type":"container","metadata":{"name":"web","labels":{"team":"a","empty":""}},"image":{"reference":"nginx:1"},
	  "resources":{"cpu":{"min":"500m","max":2},"memory":{"min":"64MB","max":"1GB"}},
	  "process":{"command":["/x"],"args":["-v"],"env":[{"name":"A","value":"1"}]},
	  "network":{"ports":[{"container_port":80,"visibility":"external"},{"container_port":81,"visibility":"none"}]}}}`
	baseDep, baseSvc := testContainer(t, body)
	baseDep.Name, baseDep.UID, baseDep.ResourceVersion, baseDep.Generation, baseDep.CreationTimestamp = "web-x", "uid-1", "42", 2, now
	baseDep.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	baseDep.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastTransitionTime: now, LastUpdateTime: later}}}
	baseSvc.Name, baseSvc.UID, baseSvc.Spec.ClusterIP = "web-y", "uid-2", "10.96.0.9"
	baseSvc.Spec.Ports[0].NodePort = 30001
	baseSvc.ResourceVersion = "43"
	basePod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-3", ResourceVersion: "44", Labels: maps.Clone(baseDep.Spec.Template.Labels), CreationTimestamp: now,
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-x-1"}}},
		Spec: baseDep.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.3", Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: later}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Image: "nginx:1", ImageID: "sha", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, FinishedAt: now}}}}},
	}
	basePod.Labels["pod-template-hash"] = "5d8f"

	cases := map[string]func(d *appsv1.Deployment, s *corev1.Service, p *corev1.Pod){
		"crash-looping, external port, load balancer": func(_ *appsv1.Deployment, s *corev1.Service, _ *corev1.Pod) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.1"}}
		},
		// Someone else's owner reference and finalizer: the cache keeps them.
		"owned and held by someone else, being deleted": func(d *appsv1.Deployment, _ *corev1.Service, p *corev1.Pod) {
			d.OwnerReferences = []metav1.OwnerReference{{Kind: "App", APIVersion: "example.com/v1", Name: "abc", UID: "l1"}}
			d.Finalizers = []string{"example.com/hold"}
			d.DeletionTimestamp = &later
			p.DeletionTimestamp = &later
		},
		// The reference provider keeps no annotation: resources come from requests/limits.
		"no resources annotation": func(d *appsv1.Deployment, _ *corev1.Service, _ *corev1.Pod) {
			delete(d.Annotations, container.AnnotationResources)
			d.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		},
		"node lost": func(_ *appsv1.Deployment, _ *corev1.Service, p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeNotReady"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: later}}
		},
		"readiness gates: not a lost node": func(_ *appsv1.Deployment, _ *corev1.Service, p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/ready"}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: later}}
		},
		"unschedulable": func(_ *appsv1.Deployment, _ *corev1.Service, p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
				Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available", LastTransitionTime: later}}}
		},
		"failed with exit code": func(_ *appsv1.Deployment, _ *corev1.Service, p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, StartedAt: now, FinishedAt: later}}
		},
		"progress deadline exceeded": func(d *appsv1.Deployment, _ *corev1.Service, p *corev1.Pod) {
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
				Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "timed out", LastTransitionTime: later})
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			d, s, p := baseDep.DeepCopy(), baseSvc.DeepCopy(), basePod.DeepCopy()
			change(d, s, p)
			full := container.Observed{Deployment: d, Service: s, Pods: []*corev1.Pod{p}}
			read := container.Observed{Deployment: through(t, d.DeepCopy()), Service: through(t, s.DeepCopy()), Pods: []*corev1.Pod{through(t, p.DeepCopy())}}
			a, _ := json.Marshal(container.ToAPI(full))
			b, _ := json.Marshal(container.ToAPI(read))
			if string(a) != string(b) {
				t.Errorf("packed objects read differently:\nserved %s\npacked %s", a, b)
			}
			if got, want := container.StatusOf(read.Deployment, read.Pods), container.StatusOf(d, []*corev1.Pod{p}); got != want {
				t.Errorf("status %v, want %v", got, want)
			}
			for _, pair := range [][2]metav1.Object{{d, read.Deployment}, {s, read.Service}, {p, read.Pods[0]}} {
				sameMeta(t, pair[0], pair[1])
			}
		})
	}
}

func sameMeta(t *testing.T, want, got metav1.Object) {
	t.Helper()
	// The resourceVersion matters to the informers, not to readers: see packedMeta.
	if got.GetName() != want.GetName() || got.GetNamespace() != want.GetNamespace() || got.GetUID() != want.GetUID() ||
		got.GetResourceVersion() != want.GetResourceVersion() ||
		(got.GetGenerateName() != want.GetGenerateName() && !isPod(want)) || !got.GetCreationTimestamp().Time.Equal(want.GetCreationTimestamp().Time) {
		t.Errorf("identity of %s differs: got %+v", want.GetName(), got)
	}
	if (got.GetDeletionTimestamp() == nil) != (want.GetDeletionTimestamp() == nil) {
		t.Errorf("%s: deletion timestamp %v, want %v", want.GetName(), got.GetDeletionTimestamp(), want.GetDeletionTimestamp())
	}
	if !maps.Equal(got.GetLabels(), want.GetLabels()) {
		t.Errorf("%s: labels %v, want %v", want.GetName(), got.GetLabels(), want.GetLabels())
	}
	if len(got.GetFinalizers()) != len(want.GetFinalizers()) {
		t.Errorf("%s: finalizers %v, want %v", want.GetName(), got.GetFinalizers(), want.GetFinalizers())
	}
	if !isPod(want) && len(got.GetOwnerReferences()) != len(want.GetOwnerReferences()) {
		t.Errorf("%s: owners %v, want %v", want.GetName(), got.GetOwnerReferences(), want.GetOwnerReferences())
	}
}

// A record reads the same: the reporter's view of it, and its metadata.
func TestPackedRecordReadsTheSame(t *testing.T) {
	for _, owed := range []bool{false, true} {
		l := container.NewRecord("abc", "inc-1", owed)
		l.Namespace, l.UID, l.ResourceVersion = "ns", "uid-9", "7"
		l.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		got := through(t, l.DeepCopy())
		want, _ := container.RecordOf(l, "abc")
		r, ok := container.RecordOf(got, "abc")
		if !ok || !r.Created.Equal(want.Created) {
			t.Errorf("owed=%v: record %+v %v, want %+v", owed, r, ok, want)
		}
		r.Created = want.Created
		if r != want {
			t.Errorf("owed=%v: record %+v %v, want %+v", owed, r, ok, want)
		}
		sameMeta(t, l, got)
	}
	l := container.NewRecord("x", "", false)
	l.Namespace = "ns"
	var _ *coordinationv1.Lease = through(t, l)
}

func TestPackedLabels(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"nil":          nil,
		"empty":        {},
		"system":       container.SystemLabels("abc"),
		"empty values": {container.LabelInstanceID: "", container.LabelIncarnation: "", "pod-template-hash": "", "a": ""},
		"all":          {container.LabelInstanceID: "abc", container.LabelIncarnation: "i", "pod-template-hash": "h", "team": "a", "b": "c=d"},
	} {
		got := packLabels(m).unpack()
		if (got == nil) != (m == nil) || !maps.Equal(got, m) {
			t.Errorf("%s: %v, want %v", name, got, m)
		}
	}
}

func isPod(o metav1.Object) bool {
	_, ok := o.(*corev1.Pod)
	return ok
}
