package container

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// withImage is the valid spec with another image reference.
func withImage(t *testing.T, ref string) *v1alpha1.ContainerSpec {
	return mutate(t, func(m map[string]any) { sub(m, "image")["reference"] = ref })
}

// imageProblems is what Validate says about spec.image.reference.
func imageProblems(spec *v1alpha1.ContainerSpec, p Policy) []string {
	var out []string
	for _, v := range Validate(spec, p) {
		if v.Pointer == Pointer("spec", "image", "reference") {
			out = append(out, v.Detail)
		}
	}
	return out
}

// The references of issue 34 (each probed the node's network through a pull), and
// their neighbours: refused whatever SP_IMAGE_REGISTRIES says, naming the rule, unless
// the operator lists that host exactly.
func TestImagePolicyRefusesTheNodesNetwork(t *testing.T) {
	cases := []struct{ ref, rule string }{
		{"127.0.0.1:22/x", ruleIPLiteral},
		{"localhost:5000/x", ruleLoopback},
		{"169.254.169.254/x", ruleIPLiteral},
		{"[::1]:10250/x", ruleIPLiteral},
		{"10.96.0.1/x", ruleIPLiteral},
		{"kubernetes.default.svc:443/x", ruleClusterInternal},
		{"nats.dcm.svc:4222/x", ruleClusterInternal},
		{"kubernetes.default/x", ruleClusterInternal},
		{"registry.kube-system.svc.cluster.local/x", ruleClusterInternal},
		{"metadata.google.internal/x", ruleClusterInternal},
		{"printer.local:9100/x", ruleClusterInternal},
		{"app.localhost/x", ruleLoopback},
		{"nats:4222/x", ruleSingleLabel},
		{"2130706433:80/x", ruleIPLiteral}, // 127.0.0.1 as inet_aton reads it
		{"0x7f.1/x", ruleIPLiteral},
		{"127.1:22/x", ruleIPLiteral},
		{"[fe80::1]/x", ruleIPLiteral},
		{"0.0.0.0:8080/x", ruleIPLiteral},
		{"LOCALHOST:5000/x", ruleLoopback},
	}
	for _, allowed := range [][]string{nil, {"*"}, {"*.svc", "*.local", "*.internal"}, {"quay.io"}} {
		for _, tc := range cases {
			got := imageProblems(withImage(t, tc.ref), Policy{Registries: allowed})
			if len(got) != 1 || !strings.Contains(got[0], tc.rule) || !strings.Contains(got[0], "SP_IMAGE_REGISTRIES") {
				t.Errorf("SP_IMAGE_REGISTRIES=%v: %s: problems %q, want one naming %q", allowed, tc.ref, got, tc.rule)
			}
		}
	}
}

// Repository prefixes, and a wildcard that matches only names with a public suffix.
func TestImagePolicyPrefixesAndPublicSuffixes(t *testing.T) {
	prefixed := Policy{Registries: []string{"gcr.io/distroless/", "quay.io"}}
	any := Policy{Registries: []string{"*"}}
	for _, tc := range []struct {
		p   Policy
		ref string
		ok  bool
	}{
		{prefixed, "gcr.io/distroless/static:nonroot", true},
		{prefixed, "gcr.io/distroless/base/debug", true},
		{prefixed, "gcr.io/distrolessx/static", false},
		{prefixed, "gcr.io/my-project/private", false},
		{prefixed, "quay.io/anything/at/all", true},
		{any, "quay.io/app", true},
		{any, "registry.example.co.uk/app", true},
		{any, "nats.dcm/x", false},
		{any, "kube-dns.kube-system/x", false},
		{any, "registry.corp/x", false},
		{any, "x.svc.k8s.corp/x", false},
		{Policy{Registries: []string{"*", "registry.corp"}}, "registry.corp/x", true},
	} {
		got := imageProblems(withImage(t, tc.ref), tc.p)
		if tc.ok != (len(got) == 0) {
			t.Errorf("SP_IMAGE_REGISTRIES=%v, %s: problems %q, want allowed=%v", tc.p.Registries, tc.ref, got, tc.ok)
		}
	}
	for e, ok := range map[string]bool{"gcr.io/distroless/": true, "gcr.io/distroless": false, "*.corp": false, "*.example.com": true,
		"*/x/": false, "gcr.io/Bad Path/": false, "localhost:5000/team/": true} {
		if got := RegistryEntryProblem(e); ok != (got == "") {
			t.Errorf("RegistryEntryProblem(%q) = %q, want ok=%v", e, got, ok)
		}
	}
}

func TestImagePolicyExactListingAllowsAnInternalHost(t *testing.T) {
	openshift := "image-registry.openshift-image-registry.svc:5000"
	p := Policy{Registries: []string{"quay.io", openshift}}
	if got := imageProblems(withImage(t, openshift+"/ns/app:v1"), p); len(got) > 0 {
		t.Errorf("a listed host is refused: %q", got)
	}
	// Its other ports are not listed, nor is the host without its port.
	for _, ref := range []string{"image-registry.openshift-image-registry.svc:22/x", "image-registry.openshift-image-registry.svc/x"} {
		if got := imageProblems(withImage(t, ref), p); len(got) != 1 {
			t.Errorf("%s: problems %q, want one", ref, got)
		}
	}
}

func TestImagePolicyRegistries(t *testing.T) {
	p := Policy{Registries: []string{"quay.io", "*.example.com", "registry.corp.test:5000", "docker.io"}}
	for ref, ok := range map[string]bool{
		"quay.io/app:v1":                   true,
		"nginx":                            true, // docker.io/library/nginx
		"docker.io/library/nginx:1":        true,
		"index.docker.io/library/nginx:1":  true, // normalized to docker.io
		"a.example.com/app":                true,
		"a.b.example.com/app":              true,
		"example.com/app":                  false, // the glob is its subdomains
		"a.example.com:5000/app":           false, // another port
		"registry.corp.test:5000/app":      true,
		"registry.corp.test/app":           false,
		"ghcr.io/app":                      false,
		"quay.io.evil.test/app":            false,
		"evilexample.com/app":              false,
		"QUAY.IO/app":                      true, // host names are case-insensitive
		"quay.io/app@sha256:" + hex64('a'): true,
	} {
		got := imageProblems(withImage(t, ref), p)
		if ok != (len(got) == 0) {
			t.Errorf("%s: problems %q, want allowed=%v", ref, got, ok)
		}
		if !ok && len(got) == 1 && !strings.Contains(got[0], "SP_IMAGE_REGISTRIES: quay.io, *.example.com") {
			t.Errorf("%s: %q does not name the allowed registries", ref, got[0])
		}
	}
}

func hex64(c byte) string { return strings.Repeat(string(c), 64) }

// The label keys that reach into another workload, a mesh, a runtime or a policy
// engine, and the rule's other sides.
func TestLabelPolicy(t *testing.T) {
	p := Policy{LabelPrefixes: []string{"example.com/", "team.corp.test/"}}
	for key, ok := range map[string]bool{
		"app":                                 true,
		"tier":                                true,
		"example.com/tier":                    true,
		"team.corp.test/owner":                true,
		"sub.example.com/tier":                false, // allowed prefixes are exact
		"other.test/x":                        false,
		"app.kubernetes.io/name":              false,
		"kubernetes.io/metadata.name":         false,
		"node-role.kubernetes.io/control":     false,
		"k8s.io/x":                            false,
		"kueue.x-k8s.io/queue-name":           false,
		"dcm.project/managed-by":              false,
		"x.dcm.project/managed-by":            false,
		"DCM.PROJECT/x":                       false, // not a label key at all
		"sidecar.istio.io/inject":             false,
		"security.istio.io/tlsMode":           false,
		"istio.io/rev":                        false,
		"linkerd.io/inject":                   false,
		"policy.cilium.io/x":                  false,
		"azure.workload.identity/use":         false,
		"projectcalico.org/x":                 false,
		"pod-security.admission.openshift.io": true,  // unprefixed (no slash): an ordinary key
		"io.kubernetes.pod.namespace":         false, // unprefixed, but the runtime's
		"io.cilium.k8s.policy.serviceaccount": false,
		"io.cilium.k8s.namespace.labels.team": false,
		"pcns.projectcalico.org/name":         false,
		"pcns.team":                           false,
		"pcsa.name":                           false,
		"aadpodidbinding":                     false,
		"AADPodIdBinding":                     false,
		"pod-template-hash":                   false,
		"controller-revision-hash":            false,
		"io.example":                          true,
	} {
		spec := mutate(t, func(m map[string]any) { sub(m, "metadata")["labels"] = map[string]any{key: "true"} })
		var got []string
		for _, v := range Validate(spec, p) {
			if v.Pointer == Pointer("spec", "metadata", "labels", key) {
				got = append(got, v.Detail)
			}
		}
		if ok != (len(got) == 0) {
			t.Errorf("label %q: problems %q, want allowed=%v", key, got, ok)
		}
	}
	// An operator cannot allow a reserved prefix.
	spec := mutate(t, func(m map[string]any) {
		sub(m, "metadata")["labels"] = map[string]any{"sidecar.istio.io/inject": "true"}
	})
	if vs := Validate(spec, Policy{LabelPrefixes: []string{"sidecar.istio.io/"}}); len(vs) != 1 || !strings.Contains(vs[0].Detail, "reserved") {
		t.Errorf("a reserved prefix the operator listed: %+v", vs)
	}
	// SP_LABEL_KEYS: only the listed unprefixed keys.
	only := Policy{LabelKeys: []string{"app", "tier"}}
	for key, ok := range map[string]bool{"app": true, "tier": true, "team": false, "example.com/x": false} {
		spec := mutate(t, func(m map[string]any) { sub(m, "metadata")["labels"] = map[string]any{key: "true"} })
		if vs := Validate(spec, only); ok != (len(vs) == 0) {
			t.Errorf("SP_LABEL_KEYS=app,tier, label %q: %+v, want allowed=%v", key, vs, ok)
		}
	}
}

func TestResourceBounds(t *testing.T) {
	p := Policy{MinCPU: resource.MustParse("100m"), MaxCPU: resource.MustParse("4"),
		MinMemory: resource.MustParse("64Mi"), MaxMemory: resource.MustParse("8Gi"), LabelPrefixes: testPolicy.LabelPrefixes}
	res := func(cpuMin, cpuMax any, memMin, memMax string) func(map[string]any) {
		return func(m map[string]any) {
			sub(m, "resources")["cpu"] = map[string]any{"min": cpuMin, "max": cpuMax}
			sub(m, "resources")["memory"] = map[string]any{"min": memMin, "max": memMax}
		}
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		want map[string]string // pointer -> detail substring
	}{
		{"within", res(1, 4, "64MB", "8GB"), nil},
		{"cpu above the maximum", res(1, 5, "1GB", "2GB"), map[string]string{
			"#/spec/resources/cpu/max": "cpu.max (5) is above this provider's maximum, 4 (SP_MAX_CPU)"}},
		{"a million cores", res(1, 1000000, "1GB", "2GB"), map[string]string{"#/spec/resources/cpu/max": "SP_MAX_CPU"}},
		{"cpu request below the minimum", res("1m", 1, "1GB", "2GB"), map[string]string{
			"#/spec/resources/cpu/min": "cpu.min (1m) is below this provider's minimum request, 100m (SP_MIN_CPU)"}},
		{"memory both ways", res(1, 2, "1MB", "4096TB"), map[string]string{
			"#/spec/resources/memory/min": "memory.min (1Mi) is below this provider's minimum request, 64Mi (SP_MIN_MEMORY)",
			"#/spec/resources/memory/max": "memory.max (4Pi) is above this provider's maximum, 8Gi (SP_MAX_MEMORY)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, v := range Validate(mutate(t, tc.edit), p) {
				got[v.Pointer] = v.Detail
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems %v, want %v", got, tc.want)
			}
			for ptr, want := range tc.want {
				if !strings.Contains(got[ptr], want) {
					t.Errorf("%s: %q, want it to contain %q", ptr, got[ptr], want)
				}
			}
		})
	}
	// The zero Policy bounds nothing beyond the parser's own limits.
	if vs := Validate(mutate(t, res("1m", 1000, "1MB", "1024GB")), Policy{LabelPrefixes: testPolicy.LabelPrefixes}); len(vs) > 0 {
		t.Errorf("zero policy: %+v", vs)
	}
}

func TestExposurePolicy(t *testing.T) {
	ports := func(vis ...string) func(map[string]any) {
		return func(m map[string]any) {
			var list []any
			for i, v := range vis {
				list = append(list, map[string]any{"container_port": 8000 + i, "visibility": v})
			}
			sub(m, "network")["ports"] = list
		}
	}
	cases := []struct {
		name   string
		p      Policy
		ports  []string
		wantAt []string // pointers
		detail string
	}{
		{"external allowed", Policy{}, []string{"external", "none"}, nil, ""},
		{"external refused", Policy{ExternalRefused: true}, []string{"internal", "external", "external"},
			[]string{"#/spec/network/ports/1/visibility", "#/spec/network/ports/2/visibility"}, "network.ports[1] (port 8001) is external, and this provider exposes nothing outside the cluster (SP_K8S_EXTERNAL_SVC_TYPE=None)"},
		{"internal is fine when external is refused", Policy{ExternalRefused: true}, []string{"internal", "none"}, nil, ""},
		{"over the external cap", Policy{MaxExternalPorts: 2}, []string{"external", "external", "external", "none"},
			[]string{"#/spec/network/ports"}, "network.ports has 3 external ports; at most 2 are allowed (SP_MAX_EXTERNAL_PORTS)"},
		{"at the cap", Policy{MaxExternalPorts: 2}, []string{"external", "external", "none"}, nil, ""},
		{"mixed refused", Policy{RefuseMixed: true}, []string{"external", "internal"},
			[]string{"#/spec/network/ports/1/visibility"}, "network.ports[1] (port 8001) is internal beside external network.ports[0] (port 8000)"},
		{"mixed exposed", Policy{}, []string{"external", "internal"}, nil, ""},
		{"internal only is not mixed", Policy{RefuseMixed: true}, []string{"internal", "internal", "none"}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var at []string
			var details []string
			tc.p.LabelPrefixes = testPolicy.LabelPrefixes
			for _, v := range Validate(mutate(t, ports(tc.ports...)), tc.p) {
				at = append(at, v.Pointer)
				details = append(details, v.Detail)
			}
			if !slices.Equal(at, tc.wantAt) {
				t.Fatalf("problems at %q (%q), want at %q", at, details, tc.wantAt)
			}
			if tc.detail != "" && !strings.Contains(details[0], tc.detail) {
				t.Errorf("%q, want it to contain %q", details[0], tc.detail)
			}
		})
	}
}

// What a pod is built with for strangers: NET_RAW dropped (baseline), ALL (restricted),
// the pull policy, ephemeral storage, names on exposed ports only, and the source ranges
// of a LoadBalancer.
func TestBuildForStrangers(t *testing.T) {
	spec := mutate(t, func(m map[string]any) {
		sub(m, "network")["ports"] = []any{
			map[string]any{"container_port": 8080, "visibility": "external"},
			map[string]any{"container_port": 9090, "visibility": "none"},
			map[string]any{"container_port": 7070, "visibility": "internal"},
		}
	})
	opts := Options{Namespace: "t", ExternalServiceType: corev1.ServiceTypeLoadBalancer, ImagePullPolicy: corev1.PullAlways,
		EphemeralStorageRequest: resource.MustParse("64Mi"), EphemeralStorageLimit: resource.MustParse("1Gi"),
		LoadBalancerSourceRanges: []string{"203.0.113.0/24"}}
	objs, err := Build("abc", spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := objs.Deployment.Spec.Template.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("imagePullPolicy = %q", c.ImagePullPolicy)
	}
	if r, l := c.Resources.Requests[corev1.ResourceEphemeralStorage], c.Resources.Limits[corev1.ResourceEphemeralStorage]; r.String() != "64Mi" || l.String() != "1Gi" {
		t.Errorf("ephemeral storage = %s/%s", r.String(), l.String())
	}
	var names []string
	for _, p := range c.Ports {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"exposed-0", "", "exposed-1"}) {
		t.Errorf("port names = %q: exposed ports are named exposed-<i>, none ports not at all", names)
	}
	if got := objs.Service.Spec.LoadBalancerSourceRanges; !slices.Equal(got, []string{"203.0.113.0/24"}) {
		t.Errorf("loadBalancerSourceRanges = %v", got)
	}
	for _, p := range []PodSecurity{Baseline, Restricted} {
		opts.PodSecurity = p
		objs, _ := Build("abc", spec, opts)
		want := map[PodSecurity]string{Baseline: "NET_RAW", Restricted: "ALL"}[p]
		if sc := objs.Deployment.Spec.Template.Spec.Containers[0].SecurityContext; len(sc.Capabilities.Drop) != 1 || string(sc.Capabilities.Drop[0]) != want {
			t.Errorf("%s: drops %v, want [%s]", p, sc.Capabilities.Drop, want)
		}
	}
	// Unset: Kubernetes' defaults, and no source ranges on a NodePort Service.
	objs, _ = Build("abc", spec, Options{Namespace: "t", ExternalServiceType: corev1.ServiceTypeNodePort, LoadBalancerSourceRanges: []string{"203.0.113.0/24"}})
	c = objs.Deployment.Spec.Template.Spec.Containers[0]
	if _, set := c.Resources.Limits[corev1.ResourceEphemeralStorage]; set || c.ImagePullPolicy != "" || objs.Service.Spec.LoadBalancerSourceRanges != nil {
		t.Errorf("zero options set %+v / %v", c, objs.Service.Spec.LoadBalancerSourceRanges)
	}
	if n := len(ExposedPortName(MaxPorts - 1)); n > 15 {
		t.Errorf("%s is %d bytes: a port name has at most 15", ExposedPortName(MaxPorts-1), n)
	}
}

func TestVisibilityOfMixedPorts(t *testing.T) {
	spec := mutate(t, func(m map[string]any) {
		sub(m, "network")["ports"] = []any{
			map[string]any{"container_port": 8080, "visibility": "external"},
			map[string]any{"container_port": 9090, "visibility": "internal"},
			map[string]any{"container_port": 7070, "visibility": "none"},
		}
	})
	var got []v1alpha1.ContainerPortVisibility
	for _, p := range *spec.Network.Ports {
		got = append(got, Visibility(spec, p))
	}
	if want := []v1alpha1.ContainerPortVisibility{"external", "external", "none"}; !slices.Equal(got, want) {
		t.Errorf("visibilities = %v, want %v", got, want)
	}
}

// The limit-to-request ratios, as a LimitRange's maxLimitRequestRatio: the issue's
// 16Mi scheduled and 64Gi allowed is refused; the seed's examples pass.
func TestResourceRatios(t *testing.T) {
	p := Policy{MaxCPURatio: 10, MaxMemoryRatio: 4, LabelPrefixes: testPolicy.LabelPrefixes}
	for _, tc := range []struct {
		cpuMin, cpuMax any
		memMin, memMax string
		want           map[string]string
	}{
		{1, 2, "1GB", "2GB", nil},
		{2, 4, "1GB", "4GB", nil}, // the seed's largest ratio
		{"10m", "100m", "16MB", "64MB", nil},
		{"10m", 16, "16MB", "64GB", map[string]string{
			"#/spec/resources/cpu/max":    "cpu.max (16) is more than 10 times cpu.min (10m), this provider's largest ratio (SP_MAX_CPU_RATIO)",
			"#/spec/resources/memory/max": "memory.max (64Gi) is more than 4 times memory.min (16Mi), this provider's largest ratio (SP_MAX_MEMORY_RATIO)"}},
		{"10m", "101m", "16MB", "65MB", map[string]string{"#/spec/resources/cpu/max": "SP_MAX_CPU_RATIO", "#/spec/resources/memory/max": "SP_MAX_MEMORY_RATIO"}},
	} {
		got := map[string]string{}
		edit := func(m map[string]any) {
			sub(m, "resources")["cpu"] = map[string]any{"min": tc.cpuMin, "max": tc.cpuMax}
			sub(m, "resources")["memory"] = map[string]any{"min": tc.memMin, "max": tc.memMax}
		}
		for _, v := range Validate(mutate(t, edit), p) {
			got[v.Pointer] = v.Detail
		}
		if len(got) != len(tc.want) {
			t.Errorf("%v/%v %s/%s: problems %v, want %v", tc.cpuMin, tc.cpuMax, tc.memMin, tc.memMax, got, tc.want)
		}
		for ptr, want := range tc.want {
			if !strings.Contains(got[ptr], want) {
				t.Errorf("%s: %q, want it to contain %q", ptr, got[ptr], want)
			}
		}
	}
}
