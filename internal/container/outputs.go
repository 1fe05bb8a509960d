package container

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// Outputs are what a running container tells DCM about where to reach it: the
// output_spec of its status events. DCM stores them with the instance and binds a
// dependent resource's references to them (${name.endpoints[0].address}) once the
// container is RUNNING.
//
// The names are DCM's where DCM names them: namespace and endpoints[] (address, port,
// protocol, scope) are the container service type's outputs in DCM's cross-provider
// outputs proposal (dcm-project/enhancements, cross-provider-outputs.md: "the container
// schema exposes endpoints[]{address, port, scope}") and the response-only
// spec.endpoints of DCM's catalog container type (control-plane,
// api/catalog/v1alpha1/servicetypes/container: ContainerEndpoint). What the proposal
// does not name (the pod IP, the Service, every port's visibility) is under
// provider_hints, the one part of output_spec DCM does not validate against the
// service type, named as this provider's GET names it.
type Outputs struct {
	// Namespace is the namespace the container runs in.
	Namespace string `json:"namespace"`
	// Endpoints are the addresses and ports to dial: GET's spec.endpoints (see
	// endpoints), one list for both. Empty, not absent, when there are none: DCM keeps
	// a key a status event leaves out.
	Endpoints []v1alpha1.ContainerEndpoint `json:"endpoints"`
	// ProviderHints are the rest of what GET shows of the container's network.
	ProviderHints OutputHints `json:"provider_hints"`
}

// OutputHints are the container's network as GET shows it: spec.network's pod IP and
// ports, and the Service's name, type and addresses.
type OutputHints struct {
	// PodIP is the IP of the pod that speaks for the container (GET's spec.network.ip).
	PodIP string `json:"pod_ip,omitempty"`
	// ServiceName, ServiceType, ClusterIP and ExternalIP are GET's service.name, .type,
	// .cluster_ip and .external_ip; absent without a Service (no port exposed).
	ServiceName string `json:"service_name,omitempty"`
	ServiceType string `json:"service_type,omitempty"`
	ClusterIP   string `json:"cluster_ip,omitempty"`
	ExternalIP  string `json:"external_ip,omitempty"`
	// Ports are every port of the container with its visibility, as GET's
	// spec.network.ports infers it from the Service (none: not exposed).
	Ports []v1alpha1.ContainerPort `json:"ports,omitempty"`
}

// OutputsOf is a live container's outputs, from what GET reads: the pod that speaks
// (PickPod) and the Service.
func OutputsOf(o Observed) Outputs {
	out := Outputs{Namespace: o.Deployment.Namespace, Endpoints: []v1alpha1.ContainerEndpoint{}}
	if e := endpoints(o.Deployment.Container, o.Service); e != nil {
		out.Endpoints = *e
	}
	if n := network(o.Deployment.Container, o.Service, PickPod(o.Pods)); n != nil {
		if n.Ip != nil {
			out.ProviderHints.PodIP = *n.Ip
		}
		if n.Ports != nil {
			out.ProviderHints.Ports = *n.Ports
		}
	}
	svc := o.Service
	if svc == nil {
		return out
	}
	h := &out.ProviderHints
	h.ServiceName, h.ServiceType, h.ExternalIP = svc.Name, string(svc.Type), svc.ExternalIP
	if svc.ClusterIP != corev1.ClusterIPNone {
		h.ClusterIP = svc.ClusterIP
	}
	return out
}

// Equal reports whether o and p say the same.
func (o Outputs) Equal(p Outputs) bool {
	oh, ph := o.ProviderHints, p.ProviderHints
	return o.Namespace == p.Namespace && slices.EqualFunc(o.Endpoints, p.Endpoints, sameEndpoint) &&
		oh.PodIP == ph.PodIP && oh.ServiceName == ph.ServiceName && oh.ServiceType == ph.ServiceType &&
		oh.ClusterIP == ph.ClusterIP && oh.ExternalIP == ph.ExternalIP && slices.Equal(oh.Ports, ph.Ports)
}

func sameEndpoint(a, b v1alpha1.ContainerEndpoint) bool {
	return a.Address == b.Address && a.Port == b.Port && a.Scope == b.Scope && ptr.Deref(a.Protocol, "") == ptr.Deref(b.Protocol, "")
}
