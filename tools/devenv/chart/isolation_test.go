package chart

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// tenantSelector is what selects every tenant's pod: a label the service sets on each
// and refuses in a container's labels.
var tenantSelector = map[string]string{container.LabelManagedBy: container.ManagedByValue}

// privateRanges is the chart's and deploy/base's default `except`.
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"}

// exposedPortNames are the names the service gives a container's exposed ports
// (container.ExposedPortName), as many as a container may have.
func exposedPortNames() []string {
	var out []string
	for i := range container.MaxPorts {
		out = append(out, container.ExposedPortName(i))
	}
	return out
}

// containerPolicies are the containers' two NetworkPolicies among objs (not the
// provider's, which selects the provider's pods).
func containerPolicies(t *testing.T, objs []*unstructured.Unstructured) (ingress, egress *networkingv1.NetworkPolicy) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &np, true); err != nil {
			t.Fatalf("NetworkPolicy %s: %v", o.GetName(), err)
		}
		if !maps.Equal(np.Spec.PodSelector.MatchLabels, tenantSelector) {
			continue
		}
		switch {
		case slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) && ingress == nil:
			ingress = &np
		case slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) && egress == nil:
			egress = &np
		default:
			t.Errorf("an unexpected NetworkPolicy of the tenants' pods: %s %+v", np.Name, np.Spec)
		}
	}
	return ingress, egress
}

// ingressPorts are the ports an ingress policy admits, as "TCP/exposed-0", and whether
// some rule limits its sources.
func ingressPorts(np *networkingv1.NetworkPolicy) (ports []string, from bool) {
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 0 {
			ports = append(ports, "every port")
		}
		for _, p := range r.Ports {
			ports = append(ports, fmt.Sprintf("%s/%s", *p.Protocol, p.Port))
		}
		from = from || len(r.From) > 0
	}
	return ports, from
}

// egressAllowsIP says whether an egress policy lets a pod reach ip on port by an
// ipBlock rule (the only kind of peer that matches an address outside the cluster, and
// the one implementations that match pod and node IPs against ipBlocks apply to them).
func egressAllowsIP(np *networkingv1.NetworkPolicy, ip string, port int32) bool {
	addr := netip.MustParseAddr(ip)
	for _, r := range np.Spec.Egress {
		portOK := len(r.Ports) == 0
		for _, p := range r.Ports {
			portOK = portOK || p.Port == nil || p.Port.IntVal == port
		}
		if !portOK {
			continue
		}
		for _, peer := range r.To {
			if peer.IPBlock == nil || !netip.MustParsePrefix(peer.IPBlock.CIDR).Contains(addr) {
				continue
			}
			excepted := false
			for _, e := range peer.IPBlock.Except {
				excepted = excepted || netip.MustParsePrefix(e).Contains(addr)
			}
			if !excepted {
				return true
			}
		}
	}
	return false
}

// Addresses a tenant's pod must not reach, whatever the cluster: pods (the provider,
// NATS, DCM) and Services in the usual private ranges, the apiserver's Service, nodes,
// cloud metadata, loopback, carrier-grade NAT ranges.
var forbidden = []string{"10.96.0.1", "10.244.3.7", "10.88.0.1", "172.17.0.1", "172.31.255.254", "192.168.1.10",
	"169.254.169.254", "100.64.0.10", "100.127.255.1", "127.0.0.1"}

// checkContainerPolicies holds the containers' policies to the agreed design: tenants'
// pods accept connections only on the named exposed ports, from anywhere, and reach DNS,
// each other and the internet outside the private ranges, nothing else.
func checkContainerPolicies(t *testing.T, what string, ingress, egress *networkingv1.NetworkPolicy) {
	t.Helper()
	if ingress == nil || egress == nil {
		t.Fatalf("%s: containers' NetworkPolicies ingress %v, egress %v: want both", what, ingress != nil, egress != nil)
	}
	var want []string
	for _, n := range exposedPortNames() {
		want = append(want, "TCP/"+n)
	}
	if got, from := ingressPorts(ingress); !slices.Equal(got, want) || from || len(ingress.Spec.Ingress) != 1 {
		t.Errorf("%s: tenants' pods admit %v (sources limited: %v), want exactly %v from anywhere", what, got, from, want)
	}
	dns, same, internet := false, false, false
	for _, r := range egress.Spec.Egress {
		for _, peer := range r.To {
			switch {
			case peer.NamespaceSelector != nil && peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "kube-system":
				var ports []string
				for _, p := range r.Ports {
					ports = append(ports, fmt.Sprintf("%s/%s", *p.Protocol, p.Port))
				}
				dns = slices.Equal(ports, []string{"UDP/53", "TCP/53"})
			case peer.PodSelector != nil && peer.NamespaceSelector == nil && len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) == 0:
				same = len(r.Ports) == 0
			case peer.IPBlock != nil:
				internet = peer.IPBlock.CIDR == "0.0.0.0/0" && slices.Equal(peer.IPBlock.Except, privateRanges)
			default:
				t.Errorf("%s: an unexpected egress peer %+v", what, peer)
			}
		}
	}
	if !dns || !same || !internet || len(egress.Spec.Egress) != 3 {
		t.Errorf("%s: egress %+v: want DNS in kube-system (53 UDP+TCP) %v, the own namespace %v, 0.0.0.0/0 except %v %v, and nothing else",
			what, egress.Spec.Egress, dns, same, privateRanges, internet)
	}
	for _, ip := range forbidden {
		for _, port := range []int32{8080, 4222, 443, 53, 10250} {
			if egressAllowsIP(egress, ip, port) {
				t.Errorf("%s: a tenant's pod may reach %s:%d", what, ip, port)
			}
		}
	}
	if !egressAllowsIP(egress, "93.184.215.14", 443) {
		t.Errorf("%s: a tenant's pod cannot reach the internet (93.184.215.14:443)", what)
	}
}

// The default layout isolates tenants: their containers go to a namespace of their own
// (neither the release's nor DCM's), where the Role and the containers' NetworkPolicies
// are; the provider's NetworkPolicy is on and admits only DCM's namespace, which no
// tenant's pod is in. Before issue 34 the defaults put the containers in the release
// namespace, with the provider's NetworkPolicy off.
func TestIsolatedLayoutByDefault(t *testing.T) {
	for _, tc := range []struct {
		name               string
		rel                Release
		values, containers string
	}{
		{"beside DCM", Release{"dcm", "dcm"}, "", "dcm-containers"},
		{"own namespace", Release{"k8s-container-sp", "sp-system"}, "", "sp-system-containers"},
		{"testdata/dcm-values.yaml", Release{"dcm", "dcm"}, string(testdata(t, "dcm-values.yaml")), "dcm-containers"},
		{"named", Release{"sp", "dcm"}, "namespace: tenants\nreplicas: 2", "tenants"},
		{"long release namespace", Release{"sp", strings.Repeat("n", 60)}, "", strings.Repeat("n", 60) + "-co"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Render(tc.rel, []byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			dep := must[appsv1.Deployment](t, objs, "Deployment")
			ns := env(t, dep)["SP_K8S_NAMESPACE"]
			if ns != tc.containers || ns == tc.rel.Namespace {
				t.Fatalf("SP_K8S_NAMESPACE=%q, want %q (not the release namespace %q)", ns, tc.containers, tc.rel.Namespace)
			}
			where := map[string]string{}
			for _, o := range objs {
				where[o.GetKind()+"/"+o.GetName()] = o.GetNamespace()
			}
			for _, k := range []string{"Deployment", "Service", "ServiceAccount", "NetworkPolicy"} {
				if got := where[k+"/"+dep.Name]; got != tc.rel.Namespace {
					t.Errorf("%s in namespace %q, want the release's %q", k, got, tc.rel.Namespace)
				}
			}
			for _, k := range []string{"Role/" + dep.Name, "RoleBinding/" + dep.Name, "NetworkPolicy/" + dep.Name + "-containers-ingress",
				"NetworkPolicy/" + dep.Name + "-containers-egress"} {
				if got := where[k]; got != ns {
					t.Errorf("%s in namespace %q, want the containers' %q", k, got, ns)
				}
			}
			np := must[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/"+dep.Name)
			if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 {
				t.Fatalf("the provider's NetworkPolicy %+v: want one rule with one peer", np.Spec)
			}
			peer := np.Spec.Ingress[0].From[0]
			if peer.PodSelector != nil || peer.IPBlock != nil || peer.NamespaceSelector == nil ||
				!maps.Equal(peer.NamespaceSelector.MatchLabels, map[string]string{"kubernetes.io/metadata.name": tc.rel.Namespace}) {
				t.Errorf("the provider's NetworkPolicy admits %+v, want DCM's namespace %s alone", peer, tc.rel.Namespace)
			}
			ingress, egress := containerPolicies(t, objs)
			checkContainerPolicies(t, "chart", ingress, egress)
		})
	}
}

// Tenants beside the provider or DCM are refused unless asked for; asked for, the
// provider's NetworkPolicy must not admit them by default.
func TestSharedNamespaceIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, values, err string }{
		{"the release namespace", "namespace: dcm", `namespace "dcm" is the provider's or DCM's namespace`},
		{"DCM's namespace", "dcmNamespace: dcm-system\nnamespace: dcm-system", `namespace "dcm-system" is the provider's or DCM's`},
		{"shared, default peer", "namespace: dcm\nallowSharedNamespace: true", "set networkPolicy.from to a peer tenants' pods cannot match"},
		{"shared, DCM elsewhere", "namespace: dcm\nallowSharedNamespace: true\ndcmNamespace: control", ""},
		{"shared, own peer", "namespace: dcm\nallowSharedNamespace: true\nnetworkPolicy: {from: [{podSelector: {matchLabels: {app.kubernetes.io/name: dcm-control-plane}}}]}", ""},
		{"shared, no policy", "namespace: dcm\nallowSharedNamespace: true\nnetworkPolicy: {enabled: false}", ""},
		{"another cluster", "namespace: dcm\nkubeconfigRef: other", ""},
		{"createNamespace with another cluster", "kubeconfigRef: other\ncreateNamespace: true", "create it there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(rel, []byte(tc.values))
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err %v, want %q", err, tc.err)
			}
		})
	}
}

// createNamespace makes the containers' namespace, labelled, and kept by helm uninstall.
func TestCreateNamespace(t *testing.T) {
	if _, ok := find[corev1.Namespace](t, render(t, ""), "Namespace"); ok {
		t.Error("a Namespace rendered without createNamespace")
	}
	objs := render(t, "createNamespace: true\nnamespaceLabels: {pod-security.kubernetes.io/enforce: restricted}")
	ns := must[corev1.Namespace](t, objs, "Namespace")
	if ns.Name != "dcm-containers" || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" ||
		ns.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("Namespace %+v: want dcm-containers, labelled, helm.sh/resource-policy keep", ns.ObjectMeta)
	}
	// Helm installs a Namespace before the namespaced objects of the release.
	if objs[0].GetKind() != "Namespace" {
		t.Errorf("the Namespace comes after %s", objs[0].GetKind())
	}
}

// Each knob of containerNetworkPolicy does what values.yaml says.
func TestContainerPolicyValues(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		for _, v := range []string{"containerNetworkPolicy: {enabled: false}", "kubeconfigRef: other"} {
			if i, e := containerPolicies(t, render(t, v)); i != nil || e != nil {
				t.Errorf("%s: containers' policies rendered", v)
			}
		}
	})
	t.Run("knobs", func(t *testing.T) {
		objs := render(t, `
containerNetworkPolicy:
  ingressFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]
  dns: {namespace: dns, podLabels: {k8s-app: kube-dns}}
  sameNamespace: false
  internet: {cidr: 0.0.0.0/0, except: [10.0.0.0/8, 203.0.113.0/24]}
  extraEgress: [{to: [{ipBlock: {cidr: 169.254.20.10/32}}], ports: [{protocol: UDP, port: 53}]}]
`)
		ingress, egress := containerPolicies(t, objs)
		if ingress == nil || egress == nil {
			t.Fatal("containers' policies missing")
		}
		if _, from := ingressPorts(ingress); !from || ingress.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "ingress-nginx" {
			t.Errorf("ingress %+v: want from ingress-nginx only", ingress.Spec.Ingress)
		}
		if len(egress.Spec.Egress) != 3 {
			t.Fatalf("egress %+v: want DNS, internet, the extra rule", egress.Spec.Egress)
		}
		d := egress.Spec.Egress[0].To[0]
		if d.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "dns" || d.PodSelector == nil || d.PodSelector.MatchLabels["k8s-app"] != "kube-dns" {
			t.Errorf("DNS peer %+v", d)
		}
		if egressAllowsIP(egress, "203.0.113.9", 443) || !egressAllowsIP(egress, "192.168.1.1", 443) || !egressAllowsIP(egress, "169.254.20.10", 53) {
			t.Errorf("internet and extra rules not as set: %+v", egress.Spec.Egress)
		}
	})
	t.Run("nothing but DNS", func(t *testing.T) {
		_, egress := containerPolicies(t, render(t, "containerNetworkPolicy: {sameNamespace: false, internet: {enabled: false}}"))
		if egress == nil || len(egress.Spec.Egress) != 1 || egress.Spec.Egress[0].Ports[0].Port.IntVal != 53 {
			t.Errorf("egress %+v: want the DNS rule alone", egress)
		}
	})
}

// krustomize builds deploy/base as `kubectl apply -k` would.
func krustomize(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), repo("deploy", "base"))
	if err != nil {
		t.Fatalf("kustomize build deploy/base: %v", err)
	}
	b, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: o})
	}
	return objs
}

// deploy/base splits the provider (k8s-container-sp) from its containers
// (dcm-containers): the provider's objects in its namespace, the Role, RoleBinding and
// containers' NetworkPolicies in the containers', bound to the provider's ServiceAccount,
// SP_K8S_NAMESPACE naming the containers' namespace and SP_ENDPOINT the provider's
// Service. The optional ClusterRole for SP_K8S_POD_SECURITY=auto is not in the base.
func TestKustomizeLayout(t *testing.T) {
	const provider, containers = "k8s-container-sp", "dcm-containers"
	objs := krustomize(t)
	where := map[string]string{}
	for _, o := range objs {
		where[o.GetKind()+"/"+o.GetName()] = o.GetNamespace()
	}
	for k, want := range map[string]string{
		"ServiceAccount/k8s-container-sp": provider, "Deployment/k8s-container-sp": provider, "Service/k8s-container-sp": provider,
		"NetworkPolicy/k8s-container-sp": provider, "PodDisruptionBudget/k8s-container-sp": provider,
		"Role/k8s-container-sp": containers, "RoleBinding/k8s-container-sp": containers,
		"NetworkPolicy/k8s-container-sp-containers-ingress": containers, "NetworkPolicy/k8s-container-sp-containers-egress": containers,
		"LimitRange/k8s-container-sp-containers": containers, "ResourceQuota/k8s-container-sp-containers": containers,
	} {
		got, ok := where[k]
		if !ok || got != want {
			t.Errorf("%s in namespace %q (rendered: %v), want %q", k, got, ok, want)
		}
	}
	var cm corev1.ConfigMap
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cm.Namespace != provider || cm.Data["SP_K8S_NAMESPACE"] != containers ||
		cm.Data["SP_ENDPOINT"] != "http://k8s-container-sp."+provider+".svc:8080" {
		t.Errorf("ConfigMap %s/%s: SP_K8S_NAMESPACE=%q SP_ENDPOINT=%q", cm.Namespace, cm.Name, cm.Data["SP_K8S_NAMESPACE"], cm.Data["SP_ENDPOINT"])
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			var rb rbacv1.RoleBinding // the subjects are the same in both
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &rb); err != nil {
				t.Fatal(err)
			}
			if len(rb.Subjects) != 1 || rb.Subjects[0].Name != "k8s-container-sp" || rb.Subjects[0].Namespace != provider {
				t.Errorf("%s binds %+v, want the provider's ServiceAccount %s/k8s-container-sp", o.GetKind(), rb.Subjects, provider)
			}
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cr.Rules[0].ResourceNames, []string{containers}) {
				t.Errorf("the namespace reader reads %v, want the containers' namespace", cr.Rules[0].ResourceNames)
			}
		case "Deployment":
			var dep appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep); err != nil {
				t.Fatal(err)
			}
			for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "SP_K8S_NAMESPACE" {
					t.Errorf("the Deployment sets SP_K8S_NAMESPACE itself (%+v): config.env's must win", e)
				}
			}
		}
	}
	np := must[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/k8s-container-sp")
	if sel := np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; sel == containers || sel == provider {
		t.Errorf("the provider's NetworkPolicy admits namespace %s, where tenants or the provider run: want DCM's", sel)
	}
	ingress, egress := containerPolicies(t, objs)
	checkContainerPolicies(t, "deploy/base", ingress, egress)
}

// The chart's containers' policies are deploy/base's.
func TestContainerPoliciesMatchKustomize(t *testing.T) {
	ci, ce := containerPolicies(t, render(t, ""))
	ki, ke := containerPolicies(t, krustomize(t))
	if ci == nil || ce == nil || ki == nil || ke == nil {
		t.Fatal("containers' policies missing")
	}
	for _, p := range []struct {
		what        string
		chart, base networkingv1.NetworkPolicySpec
	}{{"ingress", ci.Spec, ki.Spec}, {"egress", ce.Spec, ke.Spec}} {
		c, _ := yaml.Marshal(p.chart)
		b, _ := yaml.Marshal(p.base)
		if string(c) != string(b) {
			t.Errorf("%s: the chart renders\n%s\ndeploy/base has\n%s", p.what, c, b)
		}
	}
}

// What the service builds meets the ingress policy: each internal or external port is
// named exposed-<i> (so the policy admits it), each none port is unnamed (so nothing
// does), with at most 32 ports a container, as many as the policy names.
func TestBuiltPortsMatchThePolicy(t *testing.T) {
	ingress, _ := containerPolicies(t, render(t, ""))
	admitted := map[string]bool{}
	for _, p := range ingress.Spec.Ingress[0].Ports {
		admitted[p.Port.StrVal] = true
	}
	var ports []v1alpha1.ContainerPort
	vis := []v1alpha1.ContainerPortVisibility{v1alpha1.ContainerPortVisibilityInternal, v1alpha1.ContainerPortVisibilityNone, v1alpha1.ContainerPortVisibilityExternal}
	for i := range 32 {
		ports = append(ports, v1alpha1.ContainerPort{ContainerPort: int32(8000 + i), Visibility: vis[i%3]})
	}
	spec := v1alpha1.ContainerSpec{ServiceType: "container"}
	spec.Metadata.Name = "ports"
	spec.Image.Reference = "quay.io/example/app:v1"
	_ = spec.Resources.Cpu.Min.FromCpuQuantity1("100m")
	_ = spec.Resources.Cpu.Max.FromCpuQuantity1("500m")
	spec.Resources.Memory.Min, spec.Resources.Memory.Max = "64MB", "64MB"
	spec.Network = &v1alpha1.ContainerNetwork{Ports: &ports}
	if v := container.Validate(&spec, container.Policy{}); len(v) > 0 {
		t.Fatalf("the spec is refused: %v", v)
	}
	objs, err := container.Build("ports", &spec, container.Options{Namespace: "dcm-containers", ExternalServiceType: corev1.ServiceTypeNodePort})
	if err != nil {
		t.Fatal(err)
	}
	pod := objs.Deployment.Spec.Template
	if pod.Labels[container.LabelManagedBy] != container.ManagedByValue {
		t.Fatalf("the pod is not selected by the containers' policies: labels %v", pod.Labels)
	}
	for i, p := range pod.Spec.Containers[0].Ports {
		if ports[i].Visibility == v1alpha1.ContainerPortVisibilityNone {
			if p.Name != "" {
				t.Errorf("port %d (none) is named %q: a policy could admit it", p.ContainerPort, p.Name)
			}
			continue
		}
		if !admitted[p.Name] {
			t.Errorf("port %d (%s) is named %q, which the containers' ingress policy does not admit", p.ContainerPort, ports[i].Visibility, p.Name)
		}
	}
}
