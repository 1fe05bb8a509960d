package container

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// Observed is what the cluster holds for one container.
type Observed struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service // nil when none
	Pods       []*corev1.Pod
}

// ToAPI maps a container's objects to the API resource, fully populated: the spec as it
// was sent, the status from StatusOf, the Pod IP and the Service.
func ToAPI(o Observed) v1alpha1.Container {
	d := o.Deployment
	id := InstanceID(d.Labels)
	st := StatusOf(d, o.Pods)
	pod := PickPod(o.Pods)
	created := d.CreationTimestamp.UTC()
	updated := lastChange(d, pod)

	spec := v1alpha1.ContainerSpec{
		ServiceType: v1alpha1.ContainerSpecServiceTypeContainer,
		Metadata: v1alpha1.ContainerMetadata{
			Name:      strings.TrimSuffix(d.GenerateName, "-"),
			Namespace: &d.Namespace,
		},
	}
	if userLabels := userLabels(d.Labels); len(userLabels) > 0 {
		spec.Metadata.Labels = &userLabels
	}
	var ctr corev1.Container
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		ctr = cs[0]
	}
	if spec.Metadata.Name == "" {
		spec.Metadata.Name = ctr.Name
	}
	spec.Image.Reference = ctr.Image
	spec.Resources = requestedResources(d, ctr)
	if len(ctr.Command) > 0 || len(ctr.Args) > 0 || len(ctr.Env) > 0 {
		p := &v1alpha1.ContainerProcess{}
		if len(ctr.Command) > 0 {
			p.Command = ptrTo(slices.Clone(ctr.Command))
		}
		if len(ctr.Args) > 0 {
			p.Args = ptrTo(slices.Clone(ctr.Args))
		}
		if len(ctr.Env) > 0 {
			env := make([]v1alpha1.EnvVar, len(ctr.Env))
			for i, e := range ctr.Env {
				env[i] = v1alpha1.EnvVar{Name: e.Name, Value: e.Value}
			}
			p.Env = &env
		}
		spec.Process = p
	}
	spec.Network = network(ctr, o.Service, pod)

	out := v1alpha1.Container{
		Id:         &id,
		Path:       ptrTo("containers/" + id),
		Status:     &st.Status,
		CreateTime: &created,
		UpdateTime: &updated,
		Spec:       spec,
		Service:    serviceInfo(o.Service),
	}
	if st.Message != "" {
		out.StatusMessage = &st.Message
	}
	return out
}

// network echoes the ports with their visibility inferred from the Service, as the seed
// says: a port the Service exposes is internal (ClusterIP) or external (LoadBalancer,
// NodePort); any other port is none.
func network(ctr corev1.Container, svc *corev1.Service, pod *corev1.Pod) *v1alpha1.ContainerNetwork {
	n := &v1alpha1.ContainerNetwork{}
	if pod != nil && pod.Status.PodIP != "" {
		n.Ip = &pod.Status.PodIP
	}
	if len(ctr.Ports) > 0 {
		exposed := map[int32]bool{}
		visible := v1alpha1.ContainerPortVisibilityInternal
		if svc != nil {
			if svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort {
				visible = v1alpha1.ContainerPortVisibilityExternal
			}
			for _, p := range svc.Spec.Ports {
				exposed[p.TargetPort.IntVal] = true
			}
		}
		ports := make([]v1alpha1.ContainerPort, len(ctr.Ports))
		for i, p := range ctr.Ports {
			ports[i] = v1alpha1.ContainerPort{ContainerPort: p.ContainerPort, Visibility: v1alpha1.ContainerPortVisibilityNone}
			if exposed[p.ContainerPort] {
				ports[i].Visibility = visible
			}
		}
		n.Ports = &ports
	}
	if n.Ip == nil && n.Ports == nil {
		return nil
	}
	return n
}

func serviceInfo(svc *corev1.Service) *v1alpha1.ServiceInfo {
	if svc == nil {
		return nil
	}
	info := &v1alpha1.ServiceInfo{
		Name:  svc.Name,
		Type:  v1alpha1.ServiceInfoType(svc.Spec.Type),
		Ports: make([]v1alpha1.ServicePort, len(svc.Spec.Ports)),
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		info.ClusterIp = &ip
	}
	if ing := svc.Status.LoadBalancer.Ingress; len(ing) > 0 {
		if ing[0].IP != "" {
			info.ExternalIp = ptrTo(ing[0].IP)
		} else if ing[0].Hostname != "" {
			info.ExternalIp = ptrTo(ing[0].Hostname)
		}
	}
	for i, p := range svc.Spec.Ports {
		info.Ports[i] = v1alpha1.ServicePort{Port: p.Port, TargetPort: p.TargetPort.IntVal, Protocol: string(p.Protocol)}
		if p.NodePort != 0 {
			info.Ports[i].NodePort = ptrTo(p.NodePort)
		}
	}
	return info
}

// requestedResources returns spec.resources as sent (kept in an annotation); for a
// Deployment without it, it derives them from requests and limits.
func requestedResources(d *appsv1.Deployment, ctr corev1.Container) v1alpha1.ContainerResources {
	var r v1alpha1.ContainerResources
	if a, ok := d.Annotations[AnnotationResources]; ok && json.Unmarshal([]byte(a), &r) == nil {
		return r
	}
	cpu := func(q resource.Quantity) v1alpha1.CpuQuantity {
		var c v1alpha1.CpuQuantity
		_ = c.FromCpuQuantity1(q.String())
		return c
	}
	mem := func(q resource.Quantity) string {
		return formatMemory(q.Value())
	}
	r.Cpu.Min = cpu(ctr.Resources.Requests[corev1.ResourceCPU])
	r.Cpu.Max = cpu(ctr.Resources.Limits[corev1.ResourceCPU])
	r.Memory.Min = mem(ctr.Resources.Requests[corev1.ResourceMemory])
	r.Memory.Max = mem(ctr.Resources.Limits[corev1.ResourceMemory])
	return r
}

func formatMemory(bytes int64) string {
	for _, u := range []string{"TB", "GB"} {
		if m := memoryMultiplier[u]; bytes >= m && bytes%m == 0 {
			return strconv.FormatInt(bytes/m, 10) + u
		}
	}
	return strconv.FormatInt(bytes/memoryMultiplier["MB"], 10) + "MB"
}

// lastChange is the newest moment the container's status could have changed: the
// Deployment's creation, or the chosen pod's creation, condition or container-state
// transitions. On create it equals create_time.
func lastChange(d *appsv1.Deployment, pod *corev1.Pod) time.Time {
	t := d.CreationTimestamp.Time
	later := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	for _, c := range d.Status.Conditions {
		later(c.LastTransitionTime.Time)
	}
	if pod != nil {
		later(pod.CreationTimestamp.Time)
		for _, c := range pod.Status.Conditions {
			later(c.LastTransitionTime.Time)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if r := cs.State.Running; r != nil {
				later(r.StartedAt.Time)
			}
			if x := cs.State.Terminated; x != nil {
				later(x.FinishedAt.Time)
			}
		}
	}
	return t.UTC()
}

func userLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if !strings.HasPrefix(k, ReservedLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
