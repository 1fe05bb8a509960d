package store

import (
	"slices"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The informer caches hold every container's Deployment, Pod, Service and record, so
// their size is most of the provider's memory. A Kubernetes object is large before it
// holds any data (a corev1.Pod struct alone is 1,240 bytes, each label map a few
// hundred), so the caches hold packed objects instead: only the fields readers use,
// times as Unix seconds, shared strings interned (intern.go), labels packed. Readers
// never see them: byIndex unpacks a fresh Kubernetes object, so a reader cannot mutate
// the cache either. BenchmarkCacheBytesPerContainer measures the result, and
// TestPackedObjectsReadTheSame checks that nothing a reader uses is lost.

// unpacker is a packed object: it gives back the Kubernetes object readers use.
type unpacker[T any] interface{ unpack() T }

// packedCondition is a status condition. Its type, status, reason and message are the
// same in most objects (a running pod's five conditions are alike across thousands of
// pods), so they are interned together; only the time is the object's own.
type packedCondition struct {
	text       unique.Handle[conditionText]
	transition int64
}

type conditionText struct{ typ, status, reason, message string }

func packCondition(typ, status, reason, message string, transition metav1.Time) packedCondition {
	return packedCondition{unique.Make(conditionText{typ, status, reason, message}), unixOf(transition)}
}

type packedPod struct {
	packedMeta
	phase, reason, message, podIP string
	readinessGates                bool // see container.StatusOf (a lost node)
	conditions                    []packedCondition
	containers                    []packedContainerStatus
}

type packedContainerStatus struct {
	name         string
	state, last  corev1.ContainerState
	ready        bool
	started      *bool
	restartCount int32
}

func packPod(p *corev1.Pod) *packedPod {
	out := &packedPod{
		packedMeta: packMeta(&p.ObjectMeta),
		phase:      intern(string(p.Status.Phase)), reason: intern(p.Status.Reason), message: intern(p.Status.Message),
		podIP: p.Status.PodIP, readinessGates: len(p.Spec.ReadinessGates) > 0,
	}
	// A pod's owner and generated name come from its ReplicaSet, which no reader needs.
	out.owners, out.generateName = nil, ""
	for _, c := range p.Status.Conditions {
		out.conditions = append(out.conditions, packCondition(string(c.Type), string(c.Status), c.Reason, c.Message, c.LastTransitionTime))
	}
	for _, cs := range p.Status.ContainerStatuses {
		out.containers = append(out.containers, packedContainerStatus{
			name: intern(cs.Name), state: internState(cs.State), last: internState(cs.LastTerminationState),
			ready: cs.Ready, started: cs.Started, restartCount: cs.RestartCount,
		})
	}
	return out
}

func internState(s corev1.ContainerState) corev1.ContainerState {
	if w := s.Waiting; w != nil {
		s.Waiting = &corev1.ContainerStateWaiting{Reason: intern(w.Reason), Message: intern(w.Message)}
	}
	if t := s.Terminated; t != nil {
		c := *t
		c.Reason, c.Message = intern(t.Reason), intern(t.Message)
		s.Terminated = &c
	}
	return s
}

func (p *packedPod) unpack() *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: p.unpackMeta(), Status: corev1.PodStatus{
		Phase: corev1.PodPhase(p.phase), Reason: p.reason, Message: p.message, PodIP: p.podIP,
	}}
	if p.readinessGates {
		// Which gates does not matter to a reader, only that there are some.
		out.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "unknown"}}
	}
	for _, pc := range p.conditions {
		c := pc.text.Value()
		out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodConditionType(c.typ), Status: corev1.ConditionStatus(c.status),
			Reason: c.reason, Message: c.message, LastTransitionTime: timeOf(pc.transition),
		})
	}
	for _, cs := range p.containers {
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: cs.name, State: *cs.state.DeepCopy(), LastTerminationState: *cs.last.DeepCopy(),
			Ready: cs.ready, Started: cloneBool(cs.started), RestartCount: cs.restartCount,
		})
	}
	return out
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

type packedDeployment struct {
	packedMeta
	// resources is the spec's resources as sent (container.AnnotationResources).
	resources  string
	replicas   *int32
	containers []packedContainer
	conditions []packedCondition // of its status
}

type packedContainer struct {
	name, image   string
	command, args []string
	env           []corev1.EnvVar
	ports         []corev1.ContainerPort
	// requirements is kept only for a Deployment without the resources annotation (made
	// by an earlier version or by the reference provider): readers derive them from it.
	requirements *corev1.ResourceRequirements
}

func packDeployment(d *appsv1.Deployment) *packedDeployment {
	out := &packedDeployment{packedMeta: packMeta(&d.ObjectMeta), replicas: d.Spec.Replicas}
	a, hasResources := d.Annotations[container.AnnotationResources]
	out.resources = intern(a)
	for _, c := range d.Spec.Template.Spec.Containers {
		pc := packedContainer{name: intern(c.Name), image: intern(c.Image), command: c.Command, args: c.Args, env: c.Env, ports: c.Ports}
		if !hasResources {
			pc.requirements = &c.Resources
		}
		out.containers = append(out.containers, pc)
	}
	for _, c := range d.Status.Conditions {
		out.conditions = append(out.conditions, packCondition(string(c.Type), string(c.Status), c.Reason, c.Message, c.LastTransitionTime))
	}
	return out
}

// GetAnnotations: the only annotation a reader uses.
func (p *packedDeployment) GetAnnotations() map[string]string {
	if p.resources == "" {
		return nil
	}
	return map[string]string{container.AnnotationResources: p.resources}
}

func (p *packedDeployment) unpack() *appsv1.Deployment {
	out := &appsv1.Deployment{ObjectMeta: p.unpackMeta()}
	out.Annotations = p.GetAnnotations()
	if p.replicas != nil {
		out.Spec.Replicas = new(*p.replicas)
	}
	for _, c := range p.containers {
		ctr := corev1.Container{Name: c.name, Image: c.image, Command: slices.Clone(c.command), Args: slices.Clone(c.args),
			Env: slices.Clone(c.env), Ports: slices.Clone(c.ports)}
		if c.requirements != nil {
			ctr.Resources = *c.requirements.DeepCopy()
		}
		out.Spec.Template.Spec.Containers = append(out.Spec.Template.Spec.Containers, ctr)
	}
	for _, pc := range p.conditions {
		c := pc.text.Value()
		out.Status.Conditions = append(out.Status.Conditions, appsv1.DeploymentCondition{
			Type: appsv1.DeploymentConditionType(c.typ), Status: corev1.ConditionStatus(c.status),
			Reason: c.reason, Message: c.message, LastTransitionTime: timeOf(pc.transition),
		})
	}
	return out
}

type packedService struct {
	packedMeta
	typ, clusterIP string
	ports          []corev1.ServicePort
	ingress        []corev1.LoadBalancerIngress
}

func packService(s *corev1.Service) *packedService {
	out := &packedService{packedMeta: packMeta(&s.ObjectMeta), typ: intern(string(s.Spec.Type)), clusterIP: s.Spec.ClusterIP,
		ports: s.Spec.Ports, ingress: s.Status.LoadBalancer.Ingress}
	for i := range out.ports {
		p := &out.ports[i]
		p.Name, p.Protocol = intern(p.Name), corev1.Protocol(intern(string(p.Protocol)))
	}
	return out
}

func (p *packedService) unpack() *corev1.Service {
	out := &corev1.Service{ObjectMeta: p.unpackMeta()}
	out.Spec = corev1.ServiceSpec{Type: corev1.ServiceType(p.typ), ClusterIP: p.clusterIP, Ports: slices.Clone(p.ports)}
	out.Status.LoadBalancer.Ingress = slices.Clone(p.ingress)
	return out
}

// packedRecord is a container's record (a Lease): readers use only its metadata.
type packedRecord struct{ packedMeta }

func packRecord(l *coordinationv1.Lease) *packedRecord { return &packedRecord{packMeta(&l.ObjectMeta)} }

func (p *packedRecord) unpack() *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: p.unpackMeta()}
}
