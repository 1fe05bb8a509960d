package container

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

var opts = Options{Namespace: "dcm", ExternalServiceType: corev1.ServiceTypeLoadBalancer}

func TestBuildDeployment(t *testing.T) {
	objs, err := Build("abc", specJSON(t, validSpec), opts)
	if err != nil {
		t.Fatal(err)
	}
	d := objs.Deployment
	wantLabels := map[string]string{
		LabelManagedBy: "dcm", LabelInstanceID: "abc", LabelServiceType: "container",
		"team": "payments", "example.com/tier": "web",
	}
	if d.GenerateName != "web-app-" || d.Name != "" || d.Namespace != "dcm" {
		t.Errorf("name/namespace = %q/%q/%q", d.GenerateName, d.Name, d.Namespace)
	}
	if !maps.Equal(d.Labels, wantLabels) || !maps.Equal(d.Spec.Template.Labels, wantLabels) {
		t.Errorf("labels = %v / template %v", d.Labels, d.Spec.Template.Labels)
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	if sel := d.Spec.Selector.MatchLabels; len(sel) != 2 || sel[LabelInstanceID] != "abc" {
		t.Errorf("selector = %v", sel)
	}
	ps := d.Spec.Template.Spec
	if *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks ||
		ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security defaults missing: %+v", ps)
	}
	c := ps.Containers[0]
	if c.Name != "web-app" || c.Image != "quay.io/myapp:v1.2" || c.Command[0] != "/app/start" || c.Args[0] != "--x" ||
		c.Env[0] != (corev1.EnvVar{Name: "ENV", Value: "prod"}) {
		t.Errorf("container = %+v", c)
	}
	// The baseline profile (the default) keeps the runtime's capabilities but NET_RAW.
	if *c.SecurityContext.AllowPrivilegeEscalation || c.SecurityContext.RunAsNonRoot != nil ||
		!slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"NET_RAW"}) || len(c.SecurityContext.Capabilities.Add) > 0 {
		t.Errorf("container security context = %+v", c.SecurityContext)
	}
	for name, want := range map[string]string{"requests.cpu": "1", "limits.cpu": "2", "requests.memory": "512Mi", "limits.memory": "2Gi"} {
		var got string
		switch name {
		case "requests.cpu":
			got = c.Resources.Requests.Cpu().String()
		case "limits.cpu":
			got = c.Resources.Limits.Cpu().String()
		case "requests.memory":
			got = c.Resources.Requests.Memory().String()
		case "limits.memory":
			got = c.Resources.Limits.Memory().String()
		}
		if got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if len(c.Ports) != 2 || c.Ports[0].ContainerPort != 8080 || c.Ports[1].ContainerPort != 9090 {
		t.Errorf("container ports = %+v", c.Ports)
	}
	var echoed v1alpha1.ContainerResources
	if err := json.Unmarshal([]byte(d.Annotations[AnnotationResources]), &echoed); err != nil {
		t.Fatal(err)
	}
	if b, _ := echoed.Cpu.Min.MarshalJSON(); string(b) != "1" {
		t.Errorf("annotation cpu.min = %s, want 1 (as sent)", b)
	}
}

func TestBuildService(t *testing.T) {
	ports := func(ps ...string) func(m map[string]any) {
		return func(m map[string]any) {
			var list []any
			for i, v := range ps {
				list = append(list, map[string]any{"container_port": 8000 + i, "visibility": v})
			}
			if list == nil {
				delete(m, "network")
				return
			}
			sub(m, "network")["ports"] = list
		}
	}
	cases := []struct {
		name     string
		edit     func(m map[string]any)
		external corev1.ServiceType
		wantType corev1.ServiceType // "" = no Service
		wantN    int
	}{
		{"no ports", ports(), corev1.ServiceTypeLoadBalancer, "", 0},
		{"all none", ports("none", "none"), corev1.ServiceTypeLoadBalancer, "", 0},
		{"internal only", ports("internal", "none", "internal"), corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP, 2},
		{"one external", ports("internal", "external"), corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeLoadBalancer, 2},
		{"external as NodePort", ports("external"), corev1.ServiceTypeNodePort, corev1.ServiceTypeNodePort, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Build("abc", mutate(t, tc.edit), Options{Namespace: "dcm", ExternalServiceType: tc.external})
			if err != nil {
				t.Fatal(err)
			}
			svc := objs.Service
			if tc.wantType == "" {
				if svc != nil {
					t.Fatalf("service = %+v, want none", svc)
				}
				return
			}
			if svc == nil || svc.Spec.Type != tc.wantType || len(svc.Spec.Ports) != tc.wantN {
				t.Fatalf("service = %+v, want %s with %d ports", svc, tc.wantType, tc.wantN)
			}
			if svc.GenerateName != "web-app-" || svc.Labels[LabelInstanceID] != "abc" || svc.Spec.Selector[LabelInstanceID] != "abc" {
				t.Errorf("service meta = %+v selector %v", svc.ObjectMeta, svc.Spec.Selector)
			}
			for _, p := range svc.Spec.Ports {
				if p.Port != p.TargetPort.IntVal || p.Protocol != corev1.ProtocolTCP || p.Name == "" {
					t.Errorf("service port = %+v", p)
				}
			}
		})
	}
}

// ToAPI turns objects back into the resource: spec as sent, visibility inferred from the
// Service, Pod IP, service block with external IP and node ports.
func TestPodSecurityProfiles(t *testing.T) {
	for _, tc := range []struct {
		profile    PodSecurity
		nonRoot    bool
		dropAll    bool
		privEscOff bool
	}{
		{"", false, false, true}, {Baseline, false, false, true}, {Restricted, true, true, true},
	} {
		o := opts
		o.PodSecurity = tc.profile
		objs, err := Build("abc", specJSON(t, validSpec), o)
		if err != nil {
			t.Fatal(err)
		}
		ps := objs.Deployment.Spec.Template.Spec
		sc := ps.Containers[0].SecurityContext
		nonRoot := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
		dropAll := sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL"
		if nonRoot != tc.nonRoot || dropAll != tc.dropAll || *sc.AllowPrivilegeEscalation == tc.privEscOff ||
			ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%q: container %+v pod %+v", tc.profile, sc, ps.SecurityContext)
		}
	}
}

func TestToAPI(t *testing.T) {
	objs, err := Build("abc", specJSON(t, validSpec), opts)
	if err != nil {
		t.Fatal(err)
	}
	created := metav1.NewTime(time.Date(2026, 1, 21, 10, 0, 0, 0, time.UTC))
	d := objs.Deployment
	d.Name, d.CreationTimestamp = "web-app-x1y2z", created
	svc := objs.Service
	svc.Name = "web-app-k7x2m"
	svc.Spec.ClusterIP = "10.96.45.12"
	svc.Spec.Ports[0].NodePort = 31000
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}}
	started := metav1.NewTime(created.Add(90 * time.Second))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: created},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.25", ContainerStatuses: []corev1.ContainerStatus{{
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}}},
	}
	o := Objects{Deployment: d, Service: svc}.Observed()
	o.Pods = []*Pod{ptrTo(PodOf(pod))}
	got := ToAPI(o)

	if *got.Id != "abc" || *got.Path != "containers/abc" || *got.Status != v1alpha1.RUNNING {
		t.Errorf("envelope = %s %s %s", *got.Id, *got.Path, *got.Status)
	}
	if !got.CreateTime.Equal(created.Time) || !got.UpdateTime.Equal(started.Time) {
		t.Errorf("times = %v / %v", got.CreateTime, got.UpdateTime)
	}
	s := got.Spec
	if s.Metadata.Name != "web-app" || *s.Metadata.Namespace != "dcm" || (*s.Metadata.Labels)["team"] != "payments" || len(*s.Metadata.Labels) != 2 {
		t.Errorf("metadata = %+v labels %v", s.Metadata, *s.Metadata.Labels)
	}
	if b, _ := json.Marshal(s.Resources); string(b) != `{"cpu":{"max":"2","min":1},"memory":{"max":"2GB","min":"512MB"}}` {
		t.Errorf("resources = %s, want them as sent", b)
	}
	if *s.Network.Ip != "10.244.0.25" {
		t.Errorf("ip = %v", s.Network.Ip)
	}
	ports := *s.Network.Ports
	if ports[0].Visibility != v1alpha1.ContainerPortVisibilityExternal || ports[1].Visibility != v1alpha1.ContainerPortVisibilityNone {
		t.Errorf("visibility = %+v", ports)
	}
	if got.Service == nil || got.Service.Name != "web-app-k7x2m" || *got.Service.ClusterIp != "10.96.45.12" ||
		got.Service.Type != v1alpha1.LoadBalancer || *got.Service.ExternalIp != "203.0.113.9" ||
		*got.Service.Ports[0].NodePort != 31000 || got.Service.Ports[0].TargetPort != 8080 {
		t.Errorf("service = %+v", got.Service)
	}

	if b, _ := json.Marshal(s.Endpoints); string(b) != `[{"address":"10.96.45.12","port":8080,"protocol":"TCP","scope":"internal"},`+
		`{"address":"203.0.113.9","port":8080,"protocol":"TCP","scope":"external"}]` {
		t.Errorf("endpoints = %s", b)
	}

	// Without a Service every port is none and there is no service block, nor endpoints.
	got = ToAPI(Objects{Deployment: d}.Observed())
	if got.Service != nil || (*got.Spec.Network.Ports)[0].Visibility != v1alpha1.ContainerPortVisibilityNone || got.Spec.Endpoints != nil {
		t.Errorf("no service: %+v %+v %v", got.Service, *got.Spec.Network.Ports, got.Spec.Endpoints)
	}
	if *got.Status != v1alpha1.PENDING || !got.UpdateTime.Equal(*got.CreateTime) {
		t.Errorf("fresh deployment: status %s, update %v != create %v", *got.Status, got.UpdateTime, got.CreateTime)
	}
}

// spec.endpoints, DCM's catalog field: one entry per address and port a client can
// dial, the cluster IP for every exposed port (internal), the load balancer's ingress
// for an external one once assigned (external), none for a none port or a NodePort
// Service's node addresses (which the provider cannot know), omitted when empty.
func TestToAPIEndpoints(t *testing.T) {
	ports := func(ps ...string) func(m map[string]any) {
		return func(m map[string]any) {
			var list []any
			for i, v := range ps {
				list = append(list, map[string]any{"container_port": 8000 + i, "visibility": v})
			}
			sub(m, "network")["ports"] = list
		}
	}
	lb := []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}}
	cases := []struct {
		name      string
		visible   []string
		external  corev1.ServiceType
		clusterIP string
		ingress   []corev1.LoadBalancerIngress
		want      string // the endpoints as JSON; "null" = omitted
	}{
		{name: "all none: no Service, no endpoints", visible: []string{"none", "none"}, want: "null"},
		{name: "internal ports, in port order, none skipped", visible: []string{"internal", "none", "internal"}, clusterIP: "10.96.0.7",
			want: `[{"address":"10.96.0.7","port":8000,"protocol":"TCP","scope":"internal"},` +
				`{"address":"10.96.0.7","port":8002,"protocol":"TCP","scope":"internal"}]`},
		{name: "cluster IP not allocated yet", visible: []string{"internal"}, want: "null"},
		{name: "headless Service: no cluster IP to dial", visible: []string{"internal"}, clusterIP: corev1.ClusterIPNone, want: "null"},
		{name: "external on a LoadBalancer: internal then external", visible: []string{"external", "none"},
			external: corev1.ServiceTypeLoadBalancer, clusterIP: "10.96.0.7", ingress: lb,
			want: `[{"address":"10.96.0.7","port":8000,"protocol":"TCP","scope":"internal"},` +
				`{"address":"203.0.113.9","port":8000,"protocol":"TCP","scope":"external"}]`},
		{name: "load balancer by host name", visible: []string{"external"}, external: corev1.ServiceTypeLoadBalancer,
			clusterIP: "10.96.0.7", ingress: []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}},
			want: `[{"address":"10.96.0.7","port":8000,"protocol":"TCP","scope":"internal"},` +
				`{"address":"lb.example.com","port":8000,"protocol":"TCP","scope":"external"}]`},
		{name: "load balancer not assigned yet: internal only", visible: []string{"external"}, external: corev1.ServiceTypeLoadBalancer,
			clusterIP: "10.96.0.7", want: `[{"address":"10.96.0.7","port":8000,"protocol":"TCP","scope":"internal"}]`},
		{name: "NodePort: internal only, the node address is not the provider's to know", visible: []string{"external"},
			external: corev1.ServiceTypeNodePort, clusterIP: "10.96.0.7",
			want: `[{"address":"10.96.0.7","port":8000,"protocol":"TCP","scope":"internal"}]`},
		{name: "an internal port beside an external one is external too", visible: []string{"internal", "external"},
			external: corev1.ServiceTypeLoadBalancer, clusterIP: "10.96.0.7", ingress: lb,
			want: `[{"address":"10.96.0.7","port":8000,"protocol":"TCP","scope":"internal"},` +
				`{"address":"203.0.113.9","port":8000,"protocol":"TCP","scope":"external"},` +
				`{"address":"10.96.0.7","port":8001,"protocol":"TCP","scope":"internal"},` +
				`{"address":"203.0.113.9","port":8001,"protocol":"TCP","scope":"external"}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Build("abc", mutate(t, ports(tc.visible...)), Options{Namespace: "dcm", ExternalServiceType: tc.external})
			if err != nil {
				t.Fatal(err)
			}
			if svc := objs.Service; svc != nil {
				svc.Spec.ClusterIP = tc.clusterIP
				svc.Status.LoadBalancer.Ingress = tc.ingress
				for i := range svc.Spec.Ports {
					svc.Spec.Ports[i].NodePort = 30000 + int32(i) // never an endpoint's port
				}
			}
			got := ToAPI(objs.Observed())
			if b, _ := json.Marshal(got.Spec.Endpoints); string(b) != tc.want {
				t.Errorf("endpoints = %s\nwant %s", b, tc.want)
			}
			// Every endpoint is of a port that reads as exposed, with a scope it allows.
			visibility := map[int]v1alpha1.ContainerPortVisibility{}
			for _, p := range *got.Spec.Network.Ports {
				visibility[int(p.ContainerPort)] = p.Visibility
			}
			for _, e := range deref(got.Spec.Endpoints) {
				if v := visibility[e.Port]; v == v1alpha1.ContainerPortVisibilityNone ||
					(e.Scope == v1alpha1.ContainerEndpointScopeExternal && v != v1alpha1.ContainerPortVisibilityExternal) {
					t.Errorf("endpoint %+v of a port that reads as %q", e, v)
				}
			}
		})
	}

	// A Service port that forwards to no port of the container (edited by hand) is not
	// the container's: no endpoint.
	objs, _ := Build("abc", mutate(t, ports("internal")), opts)
	objs.Service.Spec.ClusterIP = "10.96.0.7"
	objs.Service.Spec.Ports[0].TargetPort.IntVal = 9999
	if got := ToAPI(objs.Observed()); got.Spec.Endpoints != nil {
		t.Errorf("endpoints of a foreign target port: %+v", *got.Spec.Endpoints)
	}
}

// A Deployment made by another provider (no annotation, no generateName) still reads.
func TestToAPIForeignDeployment(t *testing.T) {
	objs, _ := Build("abc", specJSON(t, validSpec), opts)
	d := objs.Deployment
	d.GenerateName, d.Name, d.Annotations = "", "legacy", nil
	got := ToAPI(Objects{Deployment: d}.Observed())
	if got.Spec.Metadata.Name != "web-app" {
		t.Errorf("name = %q (from the container)", got.Spec.Metadata.Name)
	}
	if b, _ := json.Marshal(got.Spec.Resources); string(b) != `{"cpu":{"max":"2","min":"1"},"memory":{"max":"2GB","min":"512MB"}}` {
		t.Errorf("derived resources = %s", b)
	}
}
