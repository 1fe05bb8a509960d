package container

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// The service reads the cluster through the types in this file, never through
// Kubernetes objects: ToAPI, StatusOf and the status controller's plan take them, and the
// store's informer caches hold them (the caches' transform fills them with
// DeploymentOf, PodOf and ServiceOf). So a field the API or the status needs that is not
// kept here is a compile error, not an empty answer, and the caches hold only what is
// read. They are values read from the cluster: never written to, and a view read from a
// cache shares its slices with it.
//
// The caches hold one for each object of every container, so they are kept small:
// conditions are reduced to the ones read, times to the newest one, strings that
// thousands of objects share are interned (see intern), labels are one interned string.

// Meta is what the service reads of an object's metadata.
type Meta struct {
	Name, Namespace string
	Created         time.Time
	// Deleting: the object has a deletion timestamp (finalizers may keep it a while).
	Deleting bool
	// ID is the container's DCM id (LabelInstanceID).
	ID string
	// Incarnation tells this container from an earlier or later one with the same id:
	// the UID of its record (see IncarnationOf); "" for an object no record owns.
	Incarnation string
}

func metaOf(m *metav1.ObjectMeta) Meta {
	return Meta{
		Name: m.Name, Namespace: Intern(m.Namespace), Created: m.CreationTimestamp.Time, Deleting: m.DeletionTimestamp != nil,
		ID: InstanceID(m.Labels), Incarnation: IncarnationOf(m),
	}
}

// Deployment is what the service reads of a container's Deployment.
type Deployment struct {
	Meta
	// UID guards a DELETE of it (a precondition).
	UID types.UID
	// GenerateName is what the apiserver made the name from: the container's name and
	// "-" ("" for a Deployment another provider named).
	GenerateName string
	// UserLabels are the labels the client asked for (none under ReservedLabelPrefix).
	UserLabels Labels
	// Replicas is the desired number of pods; nil: the default (1).
	Replicas *int32
	// Container is the pod template's first container: the one DCM asked for.
	Container Container
	// Resources is spec.resources as the client sent it (AnnotationResources); for a
	// Deployment without it (an earlier version's, the reference provider's), derived
	// from the container's requests and limits.
	Resources v1alpha1.ContainerResources
	// Available, Progressing and ReplicaFailure are those conditions of its status
	// (the last of each type; the zero Condition when it has none), each with its
	// message only in the status StatusOf reads it in (Available and Progressing
	// False, ReplicaFailure True).
	Available, Progressing, ReplicaFailure Condition
	// ImagePending says why its image is not resolved yet, ImageRefused why it never
	// will be (both "" once it is): it runs no pod meanwhile.
	ImagePending, ImageRefused string
	// Changed is the newest of its creation and its conditions' transitions.
	Changed time.Time
}

// Container is what the service reads of the container DCM asked for.
type Container struct {
	// Image is the reference as sent; Digest the one the pod runs ("" if not pinned).
	Name, Image, Digest string
	Command, Args       []string
	Env                 []EnvVar
	// Ports are the container's ports (their numbers).
	Ports []int32
}

// EnvVar is an environment variable with a literal value (one taken from elsewhere,
// on a Deployment edited by hand, reads with an empty value).
type EnvVar struct{ Name, Value string }

// Condition is a status condition: its status ("" when there is no such condition),
// reason and message.
type Condition struct {
	Status          corev1.ConditionStatus
	Reason, Message string
}

// DeploymentOf reads a Deployment.
func DeploymentOf(d *appsv1.Deployment) Deployment {
	out := Deployment{
		Meta: metaOf(&d.ObjectMeta), UID: d.UID, GenerateName: Intern(d.GenerateName),
		UserLabels: labelsOf(userLabels(d.Labels)), Changed: d.CreationTimestamp.Time,
	}
	if r := d.Spec.Replicas; r != nil {
		out.Replicas = ptrTo(*r)
	}
	var ctr corev1.Container
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		ctr = cs[0]
	}
	ref, digest := imageOf(ctr.Image, d.Annotations)
	out.Container = Container{Name: Intern(ctr.Name), Image: Intern(ref), Digest: digest, Command: ctr.Command, Args: ctr.Args}
	out.ImagePending, out.ImageRefused = d.Annotations[AnnotationImagePending], d.Annotations[AnnotationImageRefused]
	for _, e := range ctr.Env {
		out.Container.Env = append(out.Container.Env, EnvVar{Name: Intern(e.Name), Value: e.Value})
	}
	for _, p := range ctr.Ports {
		out.Container.Ports = append(out.Container.Ports, p.ContainerPort)
	}
	out.Resources = requestedResources(d.Annotations, ctr.Resources)
	for _, c := range d.Status.Conditions {
		out.Changed = newer(out.Changed, c.LastTransitionTime.Time)
		status := corev1.ConditionStatus(Intern(string(c.Status)))
		// The message only where StatusOf reads it: a healthy Deployment's messages
		// name its ReplicaSet, so they are each Deployment's own, and held by the caches
		// for every container they would cost more than the rest of its conditions.
		cond := func(readWhen corev1.ConditionStatus) Condition {
			out := Condition{Status: status, Reason: Intern(c.Reason)}
			if status == readWhen {
				out.Message = c.Message
			}
			return out
		}
		switch c.Type {
		case appsv1.DeploymentAvailable:
			out.Available = cond(corev1.ConditionFalse)
		case appsv1.DeploymentProgressing:
			out.Progressing = cond(corev1.ConditionFalse)
		case appsv1.DeploymentReplicaFailure:
			out.ReplicaFailure = cond(corev1.ConditionTrue)
		}
	}
	return out
}

// DeploymentsOf reads a list of Deployments (as the apiserver lists them).
func DeploymentsOf(items []appsv1.Deployment) []*Deployment {
	out := make([]*Deployment, len(items))
	for i := range items {
		out[i] = ptrTo(DeploymentOf(&items[i]))
	}
	return out
}

// requestedResources is spec.resources as sent (kept in an annotation); for a
// Deployment without it, derived from requests and limits.
func requestedResources(annotations map[string]string, req corev1.ResourceRequirements) v1alpha1.ContainerResources {
	var r v1alpha1.ContainerResources
	if a, ok := annotations[AnnotationResources]; ok && json.Unmarshal([]byte(a), &r) == nil {
		r.Memory.Min, r.Memory.Max = Intern(r.Memory.Min), Intern(r.Memory.Max)
		return r
	}
	r = v1alpha1.ContainerResources{} // a failed Unmarshal may have filled some of it
	cpu := func(q resource.Quantity) v1alpha1.CpuQuantity {
		var c v1alpha1.CpuQuantity
		_ = c.FromCpuQuantity1(q.String())
		return c
	}
	mem := func(q resource.Quantity) string {
		return formatMemory(q.Value())
	}
	r.Cpu.Min = cpu(req.Requests[corev1.ResourceCPU])
	r.Cpu.Max = cpu(req.Limits[corev1.ResourceCPU])
	r.Memory.Min = mem(req.Requests[corev1.ResourceMemory])
	r.Memory.Max = mem(req.Limits[corev1.ResourceMemory])
	return r
}

// Pod is what the service reads of one of a container's pods.
type Pod struct {
	Meta
	Phase corev1.PodPhase
	// Reason and Message are the pod's own (an eviction's, a lost node's).
	Reason, Message string
	IP              string
	// ReadinessGates: the pod has some (see nodeLost).
	ReadinessGates bool
	// Ready and ContainersReady are the statuses of those conditions (the last of
	// each type; "" when the pod has none).
	Ready, ContainersReady corev1.ConditionStatus
	// NotScheduled is why the pod waits for a node: the first PodScheduled condition
	// that is False; nil when there is none.
	NotScheduled *Reason
	// Container is the status of the pod's first container (the one DCM asked for); nil
	// before the kubelet reports one.
	Container *ContainerStatus
	// Changed is the newest of its creation, its conditions' transitions and its
	// containers' starts and exits.
	Changed time.Time
}

// ContainerStatus is what the service reads of a container's status.
type ContainerStatus struct {
	Ready    bool
	Restarts int32
	// Its state: one of these (the kubelet sets one; a view of a malformed status may
	// have several, or none).
	Waiting    *Reason
	Running    bool
	Terminated *Exit
	// LastExit is how it ended last time (its last termination state); nil if never.
	LastExit *Exit
}

// Reason is a reason and a message (a waiting container's, an unscheduled pod's).
type Reason struct{ Reason, Message string }

// Exit is how a container ended.
type Exit struct {
	Reason, Message string
	Code            int32
}

// PodOf reads a pod.
func PodOf(p *corev1.Pod) Pod {
	out := Pod{
		Meta:  metaOf(&p.ObjectMeta),
		Phase: corev1.PodPhase(Intern(string(p.Status.Phase))), Reason: Intern(p.Status.Reason), Message: Intern(p.Status.Message),
		IP: p.Status.PodIP, ReadinessGates: len(p.Spec.ReadinessGates) > 0, Changed: p.CreationTimestamp.Time,
	}
	for _, c := range p.Status.Conditions {
		out.Changed = newer(out.Changed, c.LastTransitionTime.Time)
		status := corev1.ConditionStatus(Intern(string(c.Status)))
		switch c.Type {
		case corev1.PodReady:
			out.Ready = status
		case corev1.ContainersReady:
			out.ContainersReady = status
		case corev1.PodScheduled:
			if status == corev1.ConditionFalse && out.NotScheduled == nil {
				out.NotScheduled = &Reason{Intern(c.Reason), Intern(c.Message)}
			}
		}
	}
	for i, cs := range p.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil {
			out.Changed = newer(out.Changed, r.StartedAt.Time)
		}
		if t := cs.State.Terminated; t != nil {
			out.Changed = newer(out.Changed, t.FinishedAt.Time)
		}
		if i == 0 {
			out.Container = &ContainerStatus{Ready: cs.Ready, Restarts: cs.RestartCount, Running: cs.State.Running != nil,
				Terminated: exitOf(cs.State.Terminated), LastExit: exitOf(cs.LastTerminationState.Terminated)}
			if w := cs.State.Waiting; w != nil {
				out.Container.Waiting = &Reason{Intern(w.Reason), Intern(w.Message)}
			}
		}
	}
	return out
}

func exitOf(t *corev1.ContainerStateTerminated) *Exit {
	if t == nil {
		return nil
	}
	return &Exit{Reason: Intern(t.Reason), Message: Intern(t.Message), Code: t.ExitCode}
}

// Service is what the service reads of a container's Service.
type Service struct {
	Meta
	// UID tells this Service from a later one with the same name (deleting the one a
	// gone container left behind).
	UID       types.UID
	Type      corev1.ServiceType
	ClusterIP string
	Ports     []ServicePort
	// ExternalIP is the first load-balancer ingress's IP, else its host name; "" when
	// none.
	ExternalIP string
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Port int32
	// TargetPort is the container port it forwards to; 0 when named.
	TargetPort int32
	// NodePort is its port on every node; 0 when none.
	NodePort int32
	Protocol corev1.Protocol
}

// ServiceOf reads a Service.
func ServiceOf(s *corev1.Service) Service {
	out := Service{Meta: metaOf(&s.ObjectMeta), UID: s.UID, Type: corev1.ServiceType(Intern(string(s.Spec.Type))), ClusterIP: s.Spec.ClusterIP}
	for _, p := range s.Spec.Ports {
		out.Ports = append(out.Ports, ServicePort{Port: p.Port, TargetPort: p.TargetPort.IntVal, NodePort: p.NodePort,
			Protocol: corev1.Protocol(Intern(string(p.Protocol)))})
	}
	if ing := s.Status.LoadBalancer.Ingress; len(ing) > 0 {
		out.ExternalIP = ing[0].IP
		if out.ExternalIP == "" {
			out.ExternalIP = ing[0].Hostname
		}
	}
	return out
}

// Observed is the container as the API shows it, from objects just written (Create):
// no pods yet.
func (o Objects) Observed() Observed {
	out := Observed{Deployment: ptrTo(DeploymentOf(o.Deployment))}
	if o.Service != nil {
		out.Service = ptrTo(ServiceOf(o.Service))
	}
	return out
}

// Labels is a set of labels held as one interned string: the same labels are on
// thousands of containers, and the caches keep one copy. The zero Labels is empty.
type Labels struct{ set unique.Handle[string] }

// Label keys and values never contain '=' or NUL (the apiserver validates them), so
// "k=v" joined by NUL, sorted, is a faithful and canonical encoding.
const labelSep = "\x00"

func labelsOf(m map[string]string) Labels {
	if len(m) == 0 {
		return Labels{}
	}
	kvs := make([]string, 0, len(m))
	for k, v := range m {
		kvs = append(kvs, k+"="+v)
	}
	slices.Sort(kvs)
	return Labels{unique.Make(strings.Join(kvs, labelSep))}
}

// Map returns the labels as a new map (empty, not nil, when there are none).
func (l Labels) Map() map[string]string {
	m := map[string]string{}
	if l.set == (unique.Handle[string]{}) {
		return m
	}
	for kv := range strings.SplitSeq(l.set.Value(), labelSep) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// userLabels are the labels that are not DCM's own.
func userLabels(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	maps.DeleteFunc(out, func(k, _ string) bool { return strings.HasPrefix(k, ReservedLabelPrefix) })
	return out
}

// newer is the later of two times.
func newer(t, u time.Time) time.Time {
	if u.After(t) {
		return u
	}
	return t
}

// Intern returns s as a copy shared with every other interned equal string (Go's unique
// package: one copy per distinct value, dropped when nothing uses it any more). Each
// object a cache holds was decoded on its own, so without it each would carry its own
// copy of strings that are the same in thousands of objects: the namespace, images,
// phases, condition reasons and messages. Values unique to one object (names, ids,
// IPs) are not interned. The views below intern what they keep; the store interns
// what it keeps beside them (a record's namespace).
func Intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
