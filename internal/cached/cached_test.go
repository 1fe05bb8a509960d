package cached

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// through puts obj through the table as its reflector would, and reads its view back
// as the store does.
func through[V any](t *testing.T, obj metav1.Object) *V {
	t.Helper()
	tab := NewTable(obj.GetNamespace(), time.Now)
	o, ok := Of(obj)
	if !ok {
		t.Fatalf("%T is not taken", obj)
	}
	if rv := o.GetResourceVersion(); rv != obj.GetResourceVersion() {
		t.Errorf("%s: resourceVersion %q, want %q", obj.GetName(), rv, obj.GetResourceVersion())
	}
	if err := tab.Source(o.Kind()).Add(obj); err != nil {
		t.Fatal(err)
	}
	read := func() *V {
		snap := tab.Snapshot(container.InstanceID(obj.GetLabels()))
		var all []any
		for _, d := range snap.Deployments {
			all = append(all, d)
		}
		for _, p := range snap.Pods {
			all = append(all, p)
		}
		for _, s := range snap.Services {
			all = append(all, s)
		}
		if len(all) != 1 {
			t.Fatalf("the snapshot holds %d objects", len(all))
		}
		v, ok := all[0].(*V)
		if !ok {
			t.Fatalf("the snapshot holds a %T", all[0])
		}
		return v
	}
	got := read()
	// A reader gets a copy: changing it changes nothing in the cache.
	var zero V
	*got = zero
	if again := read(); reflect.DeepEqual(*again, zero) {
		t.Errorf("%s: a reader changed the cache", obj.GetName())
	}
	return read()
}

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
	objs = objs.OwnedBy(container.RecordName("abc"), "0b3c5a6e-6f5e-4c9d-8f7e-000000000001")
	return objs.Deployment, objs.Service
}

// The caches hold the views the service reads (container.DeploymentOf, PodOf,
// ServiceOf), found by key and by id, whatever the objects carry. Each case is
// something a reader distinguishes.
func TestCachedObjectsReadAsServed(t *testing.T) {
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
			if got, want := through[container.Deployment](t, d), container.DeploymentOf(d); !sameView(*got, want) {
				t.Errorf("deployment read as %+v, want %+v", *got, want)
			}
			if got, want := through[container.Service](t, s), container.ServiceOf(s); !sameView(*got, want) {
				t.Errorf("service read as %+v, want %+v", *got, want)
			}
			if got, want := through[container.Pod](t, p), container.PodOf(p); !sameView(*got, want) {
				t.Errorf("pod read as %+v, want %+v", *got, want)
			}
		})
	}
}

// A record reads as container.RecordOf reads the ConfigMap; a ConfigMap with a record's labels
// but another name is not one, yet its id is known (IDs, Count).
func TestCachedRecordReadsAsServed(t *testing.T) {
	cm := func(name string, owed bool) *corev1.ConfigMap {
		l := container.NewRecord("abc", container.Request{})
		if !owed {
			l.Finalizers = nil
		}
		l.Name, l.Namespace, l.UID, l.ResourceVersion = name, "ns", "uid-9", "7"
		l.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		return l
	}
	for _, tc := range []struct {
		name   string
		cm     *corev1.ConfigMap
		record bool
	}{
		{"record", cm(container.RecordName("abc"), false), true},
		{"record, DELETED owed", cm(container.RecordName("abc"), true), true},
		{"record being deleted", func() *corev1.ConfigMap {
			l := cm(container.RecordName("abc"), true)
			l.DeletionTimestamp = &l.CreationTimestamp
			return l
		}(), true},
		{"not a record: another name", cm("someone-elses", false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := NewTable("ns", time.Now)
			if err := tab.Source(Records).Add(tc.cm.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if n := tab.Count(); n != 1 {
				t.Errorf("Count %d: a ConfigMap with a record's labels is a known id", n)
			}
			got := tab.Snapshot("abc").Record
			want, wantOK := container.RecordOf(tc.cm, "abc")
			if (got != nil) != tc.record || wantOK != tc.record || got != nil && !sameView(*got, want) {
				t.Errorf("record %+v, want %+v %v", got, want, wantOK)
			}
		})
	}
}

// The transform may see an object again (client-go says so for tombstones); what it
// made passes through unchanged.
func TestCacheObjectTwice(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: container.SystemLabels("abc")}}
	once, ok := Of(pod)
	if !ok {
		t.Fatal("a pod is not taken")
	}
	twice, ok := Of(once)
	if !ok || twice != once {
		t.Errorf("again: %v %v", twice, ok)
	}
	if again, err := Transform(cache.DeletedFinalStateUnknown{Key: "p", Obj: once}); err != nil || again != once {
		t.Errorf("a tombstone: %v %v", again, err)
	}
	other := &corev1.Secret{}
	if kept, err := Transform(other); err != nil || kept != other {
		t.Errorf("a Secret is kept as it is: %v %v", kept, err)
	}
}

// sameView: the views are equal, their times as instants (a cached time reads back in
// the local zone, as the apiserver's times are decoded; the tests' are in UTC).
func sameView[V any](a, b V) bool {
	return reflect.DeepEqual(inUTC(a), inUTC(b))
}

func inUTC[V any](v V) V {
	utc := func(m *container.Meta) { m.Created = m.Created.UTC() }
	switch x := any(&v).(type) {
	case *container.Deployment:
		utc(&x.Meta)
		x.Changed = x.Changed.UTC()
	case *container.Pod:
		utc(&x.Meta)
		x.Changed = x.Changed.UTC()
	case *container.Service:
		utc(&x.Meta)
	case *container.Record:
		x.Created = x.Created.UTC()
	}
	return v
}
