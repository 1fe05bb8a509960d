package model

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Kind is one of the four kinds of object a container is made of, as the service's
// informers list and watch them.
type Kind int

const (
	Deployments Kind = iota
	Pods
	Services
	Records // ConfigMaps labelled as container records
)

// Kinds is every Kind, in the order the store's informers are built.
var Kinds = []Kind{Deployments, Pods, Services, Records}

func (k Kind) String() string {
	return [...]string{"deployments", "pods", "services", "configmaps"}[k]
}

// apiVersion and kind are what the apiserver puts on the objects of k (and, with "List",
// on their lists).
func (k Kind) apiVersion() string {
	if k == Deployments {
		return "apps/v1"
	}
	return "v1"
}

func (k Kind) kind() string {
	return [...]string{"Deployment", "Pod", "Service", "ConfigMap"}[k]
}

// Container is one container's objects as the apiserver serves them.
type Container struct {
	Deployment *appsv1.Deployment
	Pod        *corev1.Pod
	Service    *corev1.Service
	Record     *corev1.ConfigMap
}

// Object is the container's object of kind k.
func (c Container) Object(k Kind) metav1.Object {
	switch k {
	case Deployments:
		return c.Deployment
	case Pods:
		return c.Pod
	case Services:
		return c.Service
	}
	return c.Record
}

// ID is container i's DCM id: shaped like the UUIDs DCM sends, in an order unrelated to
// i (so the caches' sorted id set is filled in random order, as in a real namespace),
// with i in its last group so that IndexOf finds i again without a table.
func ID(i int) string {
	return uuidOf(mix(uint64(i)), i)
}

// IndexOf is the i of ID(i); false for an id that is not one.
func IndexOf(id string) (int, bool) {
	if len(id) != 36 {
		return 0, false
	}
	n, err := strconv.ParseUint(id[24:], 16, 48)
	if err != nil || ID(int(n)) != id {
		return 0, false
	}
	return int(n), true
}

// mix is splitmix64's finalizer: a cheap, well-spread hash of i.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// uid is a UUID-shaped uid of object n (0-3: the kinds, 4: the incarnation) of container i.
func uid(i, n int) string {
	return uuidOf(mix(uint64(i)<<3|uint64(n)), i)
}

// uuidOf is a version 4 UUID made of the hash h, ending with i (in hex). Written by
// hand: fmt takes ten times as long, and the model server formats millions of them.
func uuidOf(h uint64, i int) string {
	var b [36]byte
	hex(b[0:8], h>>32)
	b[8] = '-'
	hex(b[9:13], h>>16)
	b[13], b[14] = '-', '4'
	hex(b[15:18], h)
	b[18] = '-'
	hex(b[19:23], 0x8000|(h>>4)&0x3fff)
	b[23] = '-'
	hex(b[24:36], uint64(i))
	return string(b[:])
}

// hex writes the low len(b) hex digits of v into b.
func hex(b []byte, v uint64) {
	const digits = "0123456789abcdef"
	for k := len(b) - 1; k >= 0; k-- {
		b[k] = digits[v&0xf]
		v >>= 4
	}
}

// suffixAlphabet is the apiserver's for generated names (k8s.io/apiserver's
// names.SimpleNameGenerator: no vowels, no confusable digits).
const suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// suffix is a generated name's 5-character suffix encoding i (27^5 > 14 million).
func suffix(i int) string {
	var b [5]byte
	for k := 4; k >= 0; k-- {
		b[k] = suffixAlphabet[i%len(suffixAlphabet)]
		i /= len(suffixAlphabet)
	}
	return string(b[:])
}

// unsuffix is the i of suffix(i); false if s is not one.
func unsuffix(s string) (int, bool) {
	if len(s) != 5 {
		return 0, false
	}
	i := 0
	for k := range 5 {
		d := strings.IndexByte(suffixAlphabet, s[k])
		if d < 0 {
			return 0, false
		}
		i = i*len(suffixAlphabet) + d
	}
	return i, true
}

// templateHash is container i's ReplicaSet pod-template-hash (10 characters, as the
// Deployment controller writes them).
func templateHash(i int) string {
	h := fnv.New32a()
	_, _ = fmt.Fprint(h, i)
	s := fmt.Sprintf("%010d", h.Sum32())
	var b [10]byte
	for k := range b {
		b[k] = suffixAlphabet[int(s[k]-'0')%len(suffixAlphabet)]
	}
	return string(b[:])
}

// specName is metadata.name of every modelled container: the generated names are it,
// "-" and a suffix.
const specName = "web"

// Spec is every modelled container's spec: a container as the bench makes them (a few
// labels and env vars, one internal port, CPU and memory bounds), the same as
// internal/store's BenchmarkCacheBytesPerContainer uses.
func Spec() *v1alpha1.ContainerSpec {
	spec := &v1alpha1.ContainerSpec{
		Metadata: v1alpha1.ContainerMetadata{Name: specName, Labels: &map[string]string{"team": "payments", "env": "prod"}},
		Image:    v1alpha1.ContainerImage{Reference: "quay.io/example/web:v1.2.3"},
		Process:  &v1alpha1.ContainerProcess{Env: &[]v1alpha1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "PORT", Value: "8080"}}},
		Network:  &v1alpha1.ContainerNetwork{Ports: &[]v1alpha1.ContainerPort{{ContainerPort: 8080, Visibility: v1alpha1.ContainerPortVisibilityInternal}}},
	}
	_ = spec.Resources.Cpu.Min.FromCpuQuantity0(1)
	_ = spec.Resources.Cpu.Max.FromCpuQuantity0(2)
	spec.Resources.Memory.Min, spec.Resources.Memory.Max = "64MB", "128MB"
	return spec
}

// Names of container i's objects. The Deployment's and Service's are generated by the
// apiserver from metadata.name (container.Build sets GenerateName); the pod's by the
// ReplicaSet controller; the record's is container.RecordName.
func DeploymentName(i int) string { return specName + "-" + suffix(i) }
func ServiceName(i int) string    { return specName + "-" + suffix(i) }
func PodName(i int) string {
	return DeploymentName(i) + "-" + templateHash(i) + "-" + suffix(i)
}

// indexOfName is the container whose object of kind k is called name.
func indexOfName(k Kind, name string) (int, bool) {
	switch k {
	case Records:
		id, ok := strings.CutPrefix(name, "dcm-container-")
		if !ok {
			return 0, false
		}
		return IndexOf(id)
	case Pods:
		if len(name) < len(specName)+1+5+1+10+1+5 {
			return 0, false
		}
		name = name[:len(specName)+1+5]
	}
	s, ok := strings.CutPrefix(name, specName+"-")
	if !ok {
		return 0, false
	}
	return unsuffix(s)
}

// Build is container i's objects as the apiserver serves them once the container runs:
// made by the service's own mapping (container.Build, container.NewRecord, owned by
// the record as a create makes them), then given what the apiserver, the
// controllers and the kubelet add: generated names, uid, resourceVersion, creation
// time, managed fields, defaults the service reads, the Deployment's status, and one
// Running, Ready pod. created is every object's creation time; resourceVersions are
// base+4i+kind.
func Build(namespace string, i int, created metav1.Time, base int64) (Container, error) {
	id := ID(i)
	inc := uid(i, 4)
	objs, err := container.Build(id, Spec(), container.Options{Namespace: namespace, PodSecurity: container.Baseline})
	if err != nil {
		return Container{}, err
	}
	objs = objs.OwnedBy(container.RecordName(id), types.UID(inc))
	server := func(k Kind, m *metav1.ObjectMeta, tm *metav1.TypeMeta, name string) {
		tm.APIVersion, tm.Kind = k.apiVersion(), k.kind()
		m.Name, m.Namespace = name, namespace
		m.UID = types.UID(uid(i, int(k)))
		m.ResourceVersion, m.CreationTimestamp = resourceVersion(base, i, k), created
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "k8s-container-sp", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: k.apiVersion(), Time: &created, FieldsType: "FieldsV1"}}
	}
	hash := templateHash(i)
	d := objs.Deployment
	server(Deployments, &d.ObjectMeta, &d.TypeMeta, DeploymentName(i))
	d.Generation = 1
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.",
				LastUpdateTime: created, LastTransitionTime: created},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				Message:        fmt.Sprintf(`ReplicaSet "%s-%s" has successfully progressed.`, d.Name, hash),
				LastUpdateTime: created, LastTransitionTime: created}}}

	s := objs.Service
	server(Services, &s.ObjectMeta, &s.TypeMeta, ServiceName(i))
	s.Spec.ClusterIP = clusterIP(i)
	s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	s.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	ipv4 := corev1.IPFamilyPolicySingleStack
	s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &ipv4, []corev1.IPFamily{corev1.IPv4Protocol}

	pod := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
	server(Pods, &pod.ObjectMeta, &pod.TypeMeta, PodName(i))
	pod.GenerateName = d.Name + "-" + hash + "-"
	pod.Labels["pod-template-hash"] = hash
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.Name + "-" + hash,
		UID: types.UID(uid(i, 5)), Controller: new(bool), BlockOwnerDeletion: new(bool)}}
	*pod.OwnerReferences[0].Controller, *pod.OwnerReferences[0].BlockOwnerDeletion = true, true
	pod.Spec.NodeName = nodeName(i)
	pod.Spec.RestartPolicy, pod.Spec.DNSPolicy, pod.Spec.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, corev1.DefaultSchedulerName
	started := true
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable,
		PodIP: podIP(i), HostIP: hostIP(i), StartTime: &created,
		Conditions: []corev1.PodCondition{
			{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: created},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: created},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: specName, Ready: true, Started: &started,
			Image: "quay.io/example/web:v1.2.3", ImageID: "quay.io/example/web@sha256:" + strings.Repeat("ab", 32),
			ContainerID: containerID(i),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}}}}
	pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
	pod.Status.HostIPs = []corev1.HostIP{{IP: pod.Status.HostIP}}

	rec := container.NewRecord(id, container.Request{})
	server(Records, &rec.ObjectMeta, &rec.TypeMeta, container.RecordName(id))
	rec.UID = types.UID(inc) // the incarnation its Deployment and Service are owned by
	return Container{Deployment: d, Pod: pod, Service: s, Record: rec}, nil
}

// What else differs from one container to the next (see template.go).

func resourceVersion(base int64, i int, k Kind) string {
	return strconv.FormatInt(base+4*int64(i)+int64(k), 10)
}

// Addresses are written with three-digit parts, so that every container's are as long
// as the reference's: the protobuf templates (template.go) need each varying value's
// length fixed, since protobuf writes lengths before what they measure. Distinct for
// every i below 3,375,000 (150 × 150 × 150).
func clusterIP(i int) string { return threeDigits(100, i) }
func podIP(i int) string     { return threeDigits(200, i) }

// threeDigits is the address 10.a.b.c with a, b and c between 100 and 249: a counting
// from first.
func threeDigits(first, i int) string {
	return fmt.Sprintf("10.%d.%d.%d", first+i/22500, 100+i/150%150, 100+i%150)
}

// nodes: a node runs 110 pods at most, so 150,000 need ~1,400 of them; 500 names are
// enough for the objects' shape.
const nodes = 500

func nodeName(i int) string    { return fmt.Sprintf("node-%03d", i%nodes) }
func hostIP(i int) string      { return threeDigits(10, i%nodes) }
func containerID(i int) string { return fmt.Sprintf("containerd://%064x", mix(uint64(i))) }
