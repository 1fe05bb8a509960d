package container

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// FuzzValidateAndBuild feeds arbitrary JSON to the domain as the API would decode it.
// Validate never panics and reports body fields in the contract's order; whatever it
// accepts, Build turns into objects the apiserver would accept (names, labels,
// selectors, annotations, requests <= limits), and ToAPI of those objects reads back
// the spec the client sent (as the API documents it: visibility inferred from the
// Service). The seed corpus is testdata/fuzz/FuzzValidateAndBuild.
func FuzzValidateAndBuild(f *testing.F) {
	f.Add("web-app-1", []byte(validSpec), false, false)
	f.Add("a", []byte(`{"service_type":"container","metadata":{"name":"1app"},"image":{"reference":"nginx"},`+
		`"resources":{"cpu":{"min":"500m","max":1},"memory":{"min":"1MB","max":"1TB"}}}`), true, true)
	f.Add("web-1", []byte(`{"service_type":"container","metadata":{"name":"web","labels":{"dcm.project/managed-by":"me"}},`+
		`"image":{"reference":"nginx"},"resources":{"cpu":{"min":"10","max":"5"},"memory":{"min":"4GB","max":"2GB"}},`+
		`"network":{"ports":[{"container_port":80,"visibility":"internal"},{"container_port":443,"visibility":"external"}]}}`), false, true)
	f.Add("x", []byte(`{"metadata":{"name":"`+strings.Repeat("a", 63)+`"},"resources":{"cpu":{"min":null}}}`), false, false)

	f.Fuzz(func(t *testing.T, id string, data []byte, nodePort, restricted bool) {
		var spec v1alpha1.ContainerSpec
		decodeErr := json.Unmarshal(data, &spec)
		// Validate must survive whatever a failed decode left behind, too.
		vs := Validate(&spec, testPolicy)
		for _, v := range vs {
			if v.Detail == "" || !strings.HasPrefix(v.Pointer, "#/spec/") || v.Param != "" {
				t.Fatalf("violation %+v: want a detail and a pointer into the spec", v)
			}
		}
		sorted := slices.Clone(vs)
		SortViolations(sorted)
		if !slices.Equal(sorted, vs) {
			t.Fatalf("Validate's violations are not in contract order:\n%q\nsorted:\n%q", vs, sorted)
		}
		if decodeErr != nil || len(vs) > 0 {
			return
		}
		if len(ValidateID("id", id)) > 0 {
			id = "web-app-1" // the handler refuses the id before Build; fuzz the spec
		}
		opts := Options{Namespace: "dcm", ExternalServiceType: corev1.ServiceTypeLoadBalancer, PodSecurity: Baseline}
		if nodePort {
			opts.ExternalServiceType = corev1.ServiceTypeNodePort
		}
		if restricted {
			opts.PodSecurity = Restricted
		}
		objs, err := Build(id, &spec, opts)
		if err != nil {
			t.Fatalf("Validate accepted the spec but Build failed: %v\n%s", err, data)
		}
		checkObjects(t, id, &spec, objs)
		// The store makes everything owned by the record before creating it.
		checkObjects(t, id, &spec, objs.OwnedBy(RecordName(id), "123e4567-e89b-12d3-a456-426614174000"))
		checkRoundTrip(t, id, &spec, objs)
	})
}

// checkObjects checks what the apiserver would check of the objects Build made.
func checkObjects(t *testing.T, id string, spec *v1alpha1.ContainerSpec, objs Objects) {
	t.Helper()
	d := objs.Deployment
	if d == nil {
		t.Fatal("no Deployment")
	}
	if d.Namespace != "dcm" || d.Name != "" || d.GenerateName != spec.Metadata.Name+"-" {
		t.Errorf("deployment namespace/name/generateName = %q/%q/%q", d.Namespace, d.Name, d.GenerateName)
	}
	// Deployments are named like DNS subdomains, Services like DNS-1035 labels; the
	// apiserver checks generateName as a prefix and then the name it generates.
	checkName(t, "deployment", d.GenerateName, apivalidation.NameIsDNSSubdomain, validation.IsDNS1123Subdomain)
	checkLabels(t, "deployment labels", d.Labels)
	checkLabels(t, "pod template labels", d.Spec.Template.Labels)
	if errs := apivalidation.ValidateAnnotations(d.Annotations, field.NewPath("metadata", "annotations")); len(errs) > 0 {
		t.Errorf("deployment annotations: %v", errs.ToAggregate())
	}
	if d.Labels[LabelInstanceID] != id || d.Labels[LabelManagedBy] != ManagedByValue || d.Labels[LabelServiceType] != ServiceTypeValue {
		t.Errorf("deployment labels %v lack the system labels of %q", d.Labels, id)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", d.Spec.Replicas)
	}
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		t.Fatalf("deployment without a selector: %+v", d.Spec.Selector)
	}
	checkLabels(t, "deployment selector", d.Spec.Selector.MatchLabels)
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("deployment selector %v does not select its pod template %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	c := d.Spec.Template.Spec.Containers[0]
	if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
		t.Errorf("container name %q: %v", c.Name, msgs)
	}
	for _, e := range c.Env {
		if msgs := validation.IsEnvVarName(e.Name); len(msgs) > 0 {
			t.Errorf("env name %q: %v", e.Name, msgs)
		}
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.Sign() <= 0 || req.Cmp(lim) > 0 {
			t.Errorf("%s: request %s, limit %s: want 0 < request <= limit", r, req.String(), lim.String())
		}
	}
	seen := map[int32]bool{}
	for _, p := range c.Ports {
		if len(validation.IsValidPortNum(int(p.ContainerPort))) > 0 || seen[p.ContainerPort] {
			t.Errorf("container port %d invalid or repeated", p.ContainerPort)
		}
		seen[p.ContainerPort] = true
	}

	svc := objs.Service
	if exposed := exposedPorts(spec); (svc != nil) != (exposed > 0) {
		t.Fatalf("%d exposed ports but service %v", exposed, svc)
	}
	if svc == nil {
		return
	}
	checkName(t, "service", svc.GenerateName, apivalidation.NameIsDNS1035Label, validation.IsDNS1035Label)
	checkLabels(t, "service labels", svc.Labels)
	checkLabels(t, "service selector", svc.Spec.Selector)
	if len(svc.Spec.Selector) == 0 || !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("service selector %v does not select the pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	for _, p := range svc.Spec.Ports {
		if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
			t.Errorf("service port name %q: %v", p.Name, msgs)
		}
		if !seen[p.Port] || p.TargetPort.IntVal != p.Port {
			t.Errorf("service port %+v is not one of the container's ports", p)
		}
	}
}

// checkName checks a generateName as the apiserver does, and the name it would make
// from it (the prefix cut to 58 characters, five random ones appended).
func checkName(t *testing.T, what, generateName string, prefix func(string, bool) []string, name func(string) []string) {
	t.Helper()
	if msgs := prefix(generateName, true); len(msgs) > 0 {
		t.Errorf("%s generateName %q: %v", what, generateName, msgs)
	}
	base := generateName
	if len(base) > 58 {
		base = base[:58]
	}
	if msgs := name(base + "x7k2q"); len(msgs) > 0 {
		t.Errorf("%s name %q: %v", what, base+"x7k2q", msgs)
	}
}

func checkLabels(t *testing.T, what string, m map[string]string) {
	t.Helper()
	for k, v := range m {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			t.Errorf("%s: key %q: %v", what, k, msgs)
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			t.Errorf("%s: %q value %q: %v", what, k, v, msgs)
		}
	}
}

// selects reports whether selector matches an object with these labels.
func selects(selector, objLabels map[string]string) bool {
	return labels.SelectorFromSet(selector).Matches(labels.Set(objLabels))
}

// checkRoundTrip reads the objects back as GET does, right after the create: the
// fields the client sent come back as sent.
func checkRoundTrip(t *testing.T, id string, spec *v1alpha1.ContainerSpec, objs Objects) {
	t.Helper()
	got := ToAPI(objs.Observed())
	if got.Id == nil || *got.Id != id || got.Path == nil || *got.Path != "containers/"+id {
		t.Errorf("id/path = %v/%v, want %q", got.Id, got.Path, id)
	}
	if got.Status == nil || *got.Status != v1alpha1.PENDING {
		t.Errorf("status = %v, want PENDING", got.Status)
	}
	want := expectedRead(spec)
	want.Metadata.Namespace = ptrTo("dcm")
	if a, b := canonical(t, want), canonical(t, got.Spec); a != b {
		t.Errorf("spec does not round-trip:\nsent %s\nread %s", a, b)
	}
	if objs.Service != nil && (got.Service == nil || len(got.Service.Ports) != len(objs.Service.Spec.Ports) ||
		string(got.Service.Type) != string(objs.Service.Spec.Type)) {
		t.Errorf("service block %+v for service %+v", got.Service, objs.Service.Spec)
	}
}

// expectedRead is what a read of a fresh container shows for spec: the user-visible
// fields as sent, empty lists and maps as absent, provider_hints dropped (accepted
// and ignored), and port visibility as the Service shows it (internal only when no
// port is external).
func expectedRead(spec *v1alpha1.ContainerSpec) v1alpha1.ContainerSpec {
	out := v1alpha1.ContainerSpec{ServiceType: spec.ServiceType, Image: spec.Image, Resources: spec.Resources,
		Metadata: v1alpha1.ContainerMetadata{Name: spec.Metadata.Name}}
	if l := spec.Metadata.Labels; l != nil && len(*l) > 0 {
		out.Metadata.Labels = ptrTo(maps.Clone(*l))
	}
	if p := spec.Process; p != nil {
		var q v1alpha1.ContainerProcess
		if p.Command != nil && len(*p.Command) > 0 {
			q.Command = p.Command
		}
		if p.Args != nil && len(*p.Args) > 0 {
			q.Args = p.Args
		}
		if p.Env != nil && len(*p.Env) > 0 {
			q.Env = p.Env
		}
		if q != (v1alpha1.ContainerProcess{}) {
			out.Process = &q
		}
	}
	if ps := ports(spec); len(ps) > 0 {
		exposedAs := v1alpha1.ContainerPortVisibilityInternal
		for _, p := range ps {
			if p.Visibility == v1alpha1.ContainerPortVisibilityExternal {
				exposedAs = v1alpha1.ContainerPortVisibilityExternal
			}
		}
		read := make([]v1alpha1.ContainerPort, len(ps))
		for i, p := range ps {
			read[i] = v1alpha1.ContainerPort{ContainerPort: p.ContainerPort, Visibility: v1alpha1.ContainerPortVisibilityNone}
			if p.Visibility != v1alpha1.ContainerPortVisibilityNone {
				read[i].Visibility = exposedAs
			}
		}
		out.Network = &v1alpha1.ContainerNetwork{Ports: &read}
	}
	return out
}

func canonical(t *testing.T, spec v1alpha1.ContainerSpec) string {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatalf("marshal %+v: %v", spec, err)
	}
	return string(b)
}
