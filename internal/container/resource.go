package container

import (
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// ToAPI maps a live container to the API resource, fully populated: the spec as it was
// sent, the status from StatusOf, the Pod IP and the Service.
func ToAPI(o Observed) v1alpha1.Container {
	d := o.Deployment
	id := d.ID
	st := StatusOf(d, o.Pods)
	pod := PickPod(o.Pods)
	created := d.Created.UTC()
	updated := lastChange(d, pod)

	spec := v1alpha1.ContainerSpec{
		ServiceType: v1alpha1.ContainerSpecServiceTypeContainer,
		Metadata: v1alpha1.ContainerMetadata{
			Name:      strings.TrimSuffix(d.GenerateName, "-"),
			Namespace: &d.Namespace,
		},
	}
	if userLabels := d.UserLabels.Map(); len(userLabels) > 0 {
		spec.Metadata.Labels = &userLabels
	}
	ctr := d.Container
	if spec.Metadata.Name == "" {
		spec.Metadata.Name = ctr.Name
	}
	spec.Image.Reference = ctr.Image
	if ctr.Digest != "" {
		spec.Image.Digest = &ctr.Digest
	}
	spec.Resources = d.Resources
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
	spec.Endpoints = endpoints(ctr, o.Service)

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
func network(ctr Container, svc *Service, pod *Pod) *v1alpha1.ContainerNetwork {
	n := &v1alpha1.ContainerNetwork{}
	if pod != nil && pod.IP != "" {
		n.Ip = &pod.IP
	}
	if len(ctr.Ports) > 0 {
		exposed := map[int32]bool{}
		visible := v1alpha1.ContainerPortVisibilityInternal
		if svc != nil {
			if svc.Type == corev1.ServiceTypeLoadBalancer || svc.Type == corev1.ServiceTypeNodePort {
				visible = v1alpha1.ContainerPortVisibilityExternal
			}
			for _, p := range svc.Ports {
				exposed[p.TargetPort] = true
			}
		}
		ports := make([]v1alpha1.ContainerPort, len(ctr.Ports))
		for i, p := range ctr.Ports {
			ports[i] = v1alpha1.ContainerPort{ContainerPort: p, Visibility: v1alpha1.ContainerPortVisibilityNone}
			if exposed[p] {
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

// endpoints are the addresses and ports the container can be dialled at, DCM's
// catalog spec.endpoints: for each container port the Service exposes (in the order of
// network.ports, so a port that reads as none has none), the cluster IP (internal),
// then, when the port is external, the load balancer's ingress once assigned
// (external). A client inside the cluster should dial the cluster IP even for an
// external port, rather than go out through the load balancer and back, so an
// external port lists both, as DCM's own example does. A NodePort Service's external
// address would be a node's: the provider does not read Nodes (cluster-wide, granted
// by neither its Role nor DCM's), and which node address a client outside can reach
// (an internal IP, a public one, a name in front) is the cluster operator's to know, so
// it lists none rather than one that may not answer; service.ports[].node_port still
// says the port.
func endpoints(ctr Container, svc *Service) *[]v1alpha1.ContainerEndpoint {
	if svc == nil {
		return nil
	}
	internal := ""
	if ip := svc.ClusterIP; ip != corev1.ClusterIPNone {
		internal = ip
	}
	external := ""
	if svc.Type == corev1.ServiceTypeLoadBalancer {
		external = svc.ExternalIP
	}
	var out []v1alpha1.ContainerEndpoint
	add := func(address string, p ServicePort, scope v1alpha1.ContainerEndpointScope) {
		if address == "" {
			return
		}
		e := v1alpha1.ContainerEndpoint{Address: address, Port: int(p.Port), Scope: scope}
		if p.Protocol != "" {
			e.Protocol = ptrTo(string(p.Protocol))
		}
		out = append(out, e)
	}
	for _, cp := range ctr.Ports {
		for _, p := range svc.Ports {
			if p.TargetPort != cp {
				continue
			}
			add(internal, p, v1alpha1.ContainerEndpointScopeInternal)
			add(external, p, v1alpha1.ContainerEndpointScopeExternal)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &out
}

func serviceInfo(svc *Service) *v1alpha1.ServiceInfo {
	if svc == nil {
		return nil
	}
	info := &v1alpha1.ServiceInfo{
		Name:  svc.Name,
		Type:  v1alpha1.ServiceInfoType(svc.Type),
		Ports: make([]v1alpha1.ServicePort, len(svc.Ports)),
	}
	if ip := svc.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		info.ClusterIp = &ip
	}
	if svc.ExternalIP != "" {
		info.ExternalIp = ptrTo(svc.ExternalIP)
	}
	for i, p := range svc.Ports {
		info.Ports[i] = v1alpha1.ServicePort{Port: p.Port, TargetPort: p.TargetPort, Protocol: string(p.Protocol)}
		if p.NodePort != 0 {
			info.Ports[i].NodePort = ptrTo(p.NodePort)
		}
	}
	return info
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
func lastChange(d *Deployment, pod *Pod) time.Time {
	t := d.Changed
	if pod != nil {
		t = newer(t, pod.Changed)
	}
	return t.UTC()
}

func ptrTo[T any](v T) *T { return &v }
