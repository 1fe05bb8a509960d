package container

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

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
	// Endpoints are the addresses and ports to dial, one per port the Service exposes
	// and address it has: internal (its cluster IP) for each, then external (the
	// load balancer's IP or host name, once assigned) for each. A port of visibility
	// none has none, as DCM's catalog says ("none yields no endpoint"); so has an
	// external port of a NodePort Service (the node addresses are not the provider's
	// to know: dial a node at the node port GET shows). Empty, not absent, when there
	// are none: DCM keeps a key a status event leaves out.
	Endpoints []Endpoint `json:"endpoints"`
	// ProviderHints are the rest of what GET shows of the container's network.
	ProviderHints OutputHints `json:"provider_hints"`
}

// Endpoint is one address and port to dial (DCM's ContainerEndpoint).
type Endpoint struct {
	Address string `json:"address"`
	Port    int32  `json:"port"`
	// Protocol is TCP or UDP (this provider's Services are TCP).
	Protocol string `json:"protocol,omitempty"`
	// Scope is internal (from inside the cluster) or external (from outside it).
	Scope v1alpha1.ContainerPortVisibility `json:"scope"`
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
	out := Outputs{Namespace: o.Deployment.Namespace, Endpoints: []Endpoint{}}
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
	for _, a := range []struct {
		address string
		scope   v1alpha1.ContainerPortVisibility
	}{{h.ClusterIP, v1alpha1.ContainerPortVisibilityInternal}, {h.ExternalIP, v1alpha1.ContainerPortVisibilityExternal}} {
		if a.address == "" {
			continue
		}
		for _, p := range svc.Ports {
			out.Endpoints = append(out.Endpoints, Endpoint{Address: a.address, Port: p.Port, Protocol: string(p.Protocol), Scope: a.scope})
		}
	}
	return out
}

// Equal reports whether o and p say the same.
func (o Outputs) Equal(p Outputs) bool {
	oh, ph := o.ProviderHints, p.ProviderHints
	return o.Namespace == p.Namespace && slices.Equal(o.Endpoints, p.Endpoints) &&
		oh.PodIP == ph.PodIP && oh.ServiceName == ph.ServiceName && oh.ServiceType == ph.ServiceType &&
		oh.ClusterIP == ph.ClusterIP && oh.ExternalIP == ph.ExternalIP && slices.Equal(oh.Ports, ph.Ports)
}
