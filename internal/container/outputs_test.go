package container

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// What a running container tells DCM about where to reach it (output_spec), one row
// per shape of its network: the Service GET shows, its addresses, the speaking pod.
func TestOutputsOf(t *testing.T) {
	dep := func(ports ...int32) *Deployment {
		return &Deployment{Meta: Meta{Namespace: "tenant-a"}, Container: Container{Ports: ports}}
	}
	runningPod := func(name, ip string, age time.Duration) *Pod {
		return &Pod{Meta: Meta{Name: name, Created: t0.Add(-age)}, Phase: corev1.PodRunning, IP: ip}
	}
	service := func(typ corev1.ServiceType, clusterIP, externalIP string, ports ...int32) *Service {
		s := &Service{Meta: Meta{Name: "web-r4h5q"}, Type: typ, ClusterIP: clusterIP, ExternalIP: externalIP}
		for _, p := range ports {
			s.Ports = append(s.Ports, ServicePort{Port: p, TargetPort: p, Protocol: corev1.ProtocolTCP})
		}
		return s
	}
	const (
		internal = v1alpha1.ContainerPortVisibilityInternal
		external = v1alpha1.ContainerPortVisibilityExternal
		none     = v1alpha1.ContainerPortVisibilityNone
	)
	ep := func(addr string, port int32, scope v1alpha1.ContainerPortVisibility) v1alpha1.ContainerEndpoint {
		return v1alpha1.ContainerEndpoint{Address: addr, Port: int(port), Protocol: ptrTo("TCP"), Scope: v1alpha1.ContainerEndpointScope(scope)}
	}
	ports := func(pv ...any) []v1alpha1.ContainerPort {
		var out []v1alpha1.ContainerPort
		for i := 0; i < len(pv); i += 2 {
			out = append(out, v1alpha1.ContainerPort{ContainerPort: pv[i].(int32), Visibility: pv[i+1].(v1alpha1.ContainerPortVisibility)})
		}
		return out
	}
	cases := []struct {
		name string
		o    Observed
		want Outputs
	}{
		{"no port: the pod IP only, no endpoint",
			Observed{Deployment: dep(), Pods: []*Pod{runningPod("a", "10.244.0.4", 0)}},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{}, ProviderHints: OutputHints{PodIP: "10.244.0.4"}}},
		{"a port kept to itself (none): listed, no endpoint, no Service",
			Observed{Deployment: dep(9090), Pods: []*Pod{runningPod("a", "10.244.0.4", 0)}},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{},
				ProviderHints: OutputHints{PodIP: "10.244.0.4", Ports: ports(int32(9090), none)}}},
		{"ClusterIP: an internal endpoint per exposed port, on the cluster IP and the Service's port",
			Observed{Deployment: dep(8080, 9090, 5432), Service: service(corev1.ServiceTypeClusterIP, "10.96.0.12", "", 8080, 5432),
				Pods: []*Pod{runningPod("a", "10.244.0.4", 0)}},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{ep("10.96.0.12", 8080, internal), ep("10.96.0.12", 5432, internal)},
				ProviderHints: OutputHints{PodIP: "10.244.0.4", ServiceName: "web-r4h5q", ServiceType: "ClusterIP", ClusterIP: "10.96.0.12",
					Ports: ports(int32(8080), internal, int32(9090), none, int32(5432), internal)}}},
		{"LoadBalancer, no address yet: internal endpoints only",
			Observed{Deployment: dep(8080), Service: service(corev1.ServiceTypeLoadBalancer, "10.96.0.12", "", 8080),
				Pods: []*Pod{runningPod("a", "10.244.0.4", 0)}},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{ep("10.96.0.12", 8080, internal)},
				ProviderHints: OutputHints{PodIP: "10.244.0.4", ServiceName: "web-r4h5q", ServiceType: "LoadBalancer", ClusterIP: "10.96.0.12",
					Ports: ports(int32(8080), external)}}},
		{"LoadBalancer with its address: per port, the internal endpoint, then the external one",
			Observed{Deployment: dep(8080, 8443), Service: service(corev1.ServiceTypeLoadBalancer, "10.96.0.12", "34.123.45.67", 8080, 8443),
				Pods: []*Pod{runningPod("a", "10.244.0.4", 0)}},
			Outputs{Namespace: "tenant-a",
				Endpoints: []v1alpha1.ContainerEndpoint{ep("10.96.0.12", 8080, internal), ep("34.123.45.67", 8080, external),
					ep("10.96.0.12", 8443, internal), ep("34.123.45.67", 8443, external)},
				ProviderHints: OutputHints{PodIP: "10.244.0.4", ServiceName: "web-r4h5q", ServiceType: "LoadBalancer", ClusterIP: "10.96.0.12",
					ExternalIP: "34.123.45.67", Ports: ports(int32(8080), external, int32(8443), external)}}},
		{"LoadBalancer whose ingress is a host name: the host name to dial",
			Observed{Deployment: dep(8080), Service: service(corev1.ServiceTypeLoadBalancer, "10.96.0.12", "a1b2.elb.example.com", 8080)},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{ep("10.96.0.12", 8080, internal), ep("a1b2.elb.example.com", 8080, external)},
				ProviderHints: OutputHints{ServiceName: "web-r4h5q", ServiceType: "LoadBalancer", ClusterIP: "10.96.0.12",
					ExternalIP: "a1b2.elb.example.com", Ports: ports(int32(8080), external)}}},
		{"NodePort: internal endpoints only (no node address is the provider's to know)",
			Observed{Deployment: dep(8080), Service: service(corev1.ServiceTypeNodePort, "10.96.0.12", "", 8080),
				Pods: []*Pod{runningPod("a", "10.244.0.4", 0)}},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{ep("10.96.0.12", 8080, internal)},
				ProviderHints: OutputHints{PodIP: "10.244.0.4", ServiceName: "web-r4h5q", ServiceType: "NodePort", ClusterIP: "10.96.0.12",
					Ports: ports(int32(8080), external)}}},
		{"a headless Service (made by hand): no cluster IP, no endpoint",
			Observed{Deployment: dep(8080), Service: service(corev1.ServiceTypeClusterIP, corev1.ClusterIPNone, "", 8080)},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{},
				ProviderHints: OutputHints{ServiceName: "web-r4h5q", ServiceType: "ClusterIP", Ports: ports(int32(8080), internal)}}},
		{"several pods: the one that speaks for the container gives the IP (the Running one)",
			Observed{Deployment: dep(), Pods: []*Pod{
				{Meta: Meta{Name: "new", Created: t0}, Phase: corev1.PodPending, IP: "10.244.0.9"},
				runningPod("old", "10.244.0.4", time.Hour)}},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{}, ProviderHints: OutputHints{PodIP: "10.244.0.4"}}},
		{"no pod IP yet", Observed{Deployment: dep(), Pods: []*Pod{{Phase: corev1.PodRunning}}},
			Outputs{Namespace: "tenant-a", Endpoints: []v1alpha1.ContainerEndpoint{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := OutputsOf(tc.o)
			if !got.Equal(tc.want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(tc.want)
				t.Errorf("OutputsOf\n got %s\nwant %s", g, w)
			}
			// GET shows the same: its pod IP, Service and port visibilities.
			api := ToAPI(tc.o)
			if n := api.Spec.Network; n != nil && n.Ip != nil && *n.Ip != got.ProviderHints.PodIP {
				t.Errorf("pod IP %q, GET's %q", got.ProviderHints.PodIP, *n.Ip)
			}
			if s := api.Service; (s == nil) != (got.ProviderHints.ServiceName == "") || (s != nil && s.Name != got.ProviderHints.ServiceName) {
				t.Errorf("service %q, GET's %+v", got.ProviderHints.ServiceName, s)
			}
			// One list: GET's spec.endpoints are the events' endpoints.
			if e := api.Spec.Endpoints; (e == nil) != (len(got.Endpoints) == 0) || (e != nil && !slices.EqualFunc(*e, got.Endpoints, sameEndpoint)) {
				t.Errorf("endpoints %+v, GET's %+v", got.Endpoints, e)
			}
			// Never null: DCM keeps a key an event leaves out, so "none" is [].
			if got.Endpoints == nil {
				t.Error("endpoints nil")
			}
		})
	}
}

// Equal sees every field: a change of any one is a change DCM is told about.
func TestOutputsEqual(t *testing.T) {
	base := func() Outputs {
		return Outputs{Namespace: "n", Endpoints: []v1alpha1.ContainerEndpoint{{Address: "10.96.0.12", Port: 80, Protocol: ptrTo("TCP"), Scope: "internal"}},
			ProviderHints: OutputHints{PodIP: "10.244.0.4", ServiceName: "s", ServiceType: "ClusterIP", ClusterIP: "10.96.0.12",
				ExternalIP: "", Ports: []v1alpha1.ContainerPort{{ContainerPort: 80, Visibility: "internal"}}}}
	}
	if !base().Equal(base()) {
		t.Error("equal outputs differ")
	}
	if !(Outputs{Endpoints: []v1alpha1.ContainerEndpoint{}}).Equal(Outputs{}) {
		t.Error("no endpoints and an empty list differ")
	}
	for name, change := range map[string]func(*Outputs){
		"namespace": func(o *Outputs) { o.Namespace = "m" },
		"an endpoint more": func(o *Outputs) {
			o.Endpoints = append(o.Endpoints, v1alpha1.ContainerEndpoint{Address: "1.2.3.4", Port: 80, Scope: "external"})
		},
		"an endpoint's port": func(o *Outputs) {
			o.Endpoints = []v1alpha1.ContainerEndpoint{{Address: "10.96.0.12", Port: 81, Protocol: ptrTo("TCP"), Scope: "internal"}}
		},
		"pod IP":       func(o *Outputs) { o.ProviderHints.PodIP = "10.244.0.5" },
		"service name": func(o *Outputs) { o.ProviderHints.ServiceName = "t" },
		"service type": func(o *Outputs) { o.ProviderHints.ServiceType = "LoadBalancer" },
		"cluster IP":   func(o *Outputs) { o.ProviderHints.ClusterIP = "10.96.0.13" },
		"external IP":  func(o *Outputs) { o.ProviderHints.ExternalIP = "34.1.2.3" },
		"a port's visibility": func(o *Outputs) {
			o.ProviderHints.Ports = []v1alpha1.ContainerPort{{ContainerPort: 80, Visibility: "external"}}
		},
	} {
		o := base()
		change(&o)
		if o.Equal(base()) || base().Equal(o) {
			t.Errorf("%s changed, outputs still equal", name)
		}
	}
}
