package chart

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The repository's root, from the chart's directory.
func repo(path ...string) string {
	return filepath.Join(append([]string{Dir(), "..", "..", ".."}, path...)...)
}

var rel = Release{Name: "dcm", Namespace: "dcm"}

// Values files: testdata (also rendered by make lint) and a few inline ones.
func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(), "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// everything turns every optional part on, so the checks over all objects see them all.
const everything = `
replicas: 3
kubeconfigRef: sp-kubeconfig
apiToken: {secretName: sp-token}
tls: {secretName: sp-tls}
namespaceReader: {enabled: true}
networkPolicy: {enabled: true}
extraEnv: [{name: SP_MAX_CONTAINERS, value: "2000"}]
`

// withoutKubeconfig is everything with the service account's RBAC instead.
const withoutKubeconfig = `
replicas: 3
apiToken: {secretName: sp-token}
tls: {secretName: sp-tls}
namespaceReader: {enabled: true}
networkPolicy: {enabled: true}
podSecurity: auto
`

// valueSets are the values every check over all objects renders: the defaults, every
// optional part on (with and without kubeconfigRef) and the DCM-like file.
func valueSets(t *testing.T) []struct{ name, values string } {
	return []struct{ name, values string }{
		{"defaults", ""},
		{"everything", everything},
		{"everything without kubeconfigRef", withoutKubeconfig},
		{"testdata/dcm-values.yaml", string(testdata(t, "dcm-values.yaml"))},
	}
}

func render(t *testing.T, values string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Render(rel, []byte(values))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return objs
}

// find returns the one object of kind in objs ("Kind", or "Kind/name" for one of
// several), converted to T; ok false when none.
func find[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) (T, bool) {
	t.Helper()
	var out T
	var found []*unstructured.Unstructured
	kind, name, named := strings.Cut(kind, "/")
	for _, o := range objs {
		if o.GetKind() == kind && (!named || o.GetName() == name) {
			found = append(found, o)
		}
	}
	switch len(found) {
	case 0:
		return out, false
	case 1:
	default:
		t.Fatalf("%d objects of kind %s", len(found), kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(found[0].Object, &out, true); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return out, true
}

func must[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) T {
	t.Helper()
	v, ok := find[T](t, objs, kind)
	if !ok {
		t.Fatalf("no %s rendered", kind)
	}
	return v
}

// base reads one file of deploy/base into T.
func base[T any](t *testing.T, file string) T {
	t.Helper()
	var out T
	b, err := os.ReadFile(repo("deploy", "base", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &out); err != nil {
		t.Fatalf("deploy/base/%s: %v", file, err)
	}
	return out
}

// grants expands rules into "verb group/resource[/name]" lines, so two Roles that grant
// the same things in differently grouped rules compare equal.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, strings.TrimSuffix(fmt.Sprintf("%s %s/%s/%s", v, g, res, n), "/"))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The chart's Role grants exactly what deploy/base/role.yaml grants (which grants exactly
// what the service uses: access.Required), in the namespace the containers go to, to the chart's service
// account; the optional ClusterRole is deploy/base/clusterrole.yaml's, for the
// containers' namespace only.
func TestRoleRulesMatchKustomize(t *testing.T) {
	want := base[rbacv1.Role](t, "role.yaml").Rules
	for _, tc := range []struct {
		name, values, namespace string
	}{
		{"defaults", "", "dcm-containers"},
		{"containers elsewhere", "namespace: tenants\nnamespaceReader: {enabled: true}", "tenants"},
		{"DCM-like", string(testdata(t, "dcm-values.yaml")), "dcm-containers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.values)
			role := must[rbacv1.Role](t, objs, "Role")
			if got, want := grants(role.Rules), grants(want); !slices.Equal(got, want) {
				t.Errorf("the chart's Role grants\n  %s\ndeploy/base/role.yaml grants\n  %s",
					strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if role.Namespace != tc.namespace {
				t.Errorf("Role in namespace %q, want %q (the containers')", role.Namespace, tc.namespace)
			}
			rb := must[rbacv1.RoleBinding](t, objs, "RoleBinding")
			sa := must[corev1.ServiceAccount](t, objs, "ServiceAccount")
			dep := must[appsv1.Deployment](t, objs, "Deployment")
			if rb.Namespace != tc.namespace || rb.RoleRef.Name != role.Name || len(rb.Subjects) != 1 ||
				rb.Subjects[0].Name != sa.Name || rb.Subjects[0].Namespace != rel.Namespace ||
				dep.Spec.Template.Spec.ServiceAccountName != sa.Name {
				t.Errorf("RoleBinding %+v does not bind Role %s to the pods' ServiceAccount %s/%s", rb, role.Name, rel.Namespace, sa.Name)
			}
			cr, ok := find[rbacv1.ClusterRole](t, objs, "ClusterRole")
			if !strings.Contains(tc.values, "namespaceReader: {enabled: true}") {
				if ok {
					t.Errorf("a ClusterRole without namespaceReader.enabled: %+v", cr)
				}
				return
			}
			baseCR := base[rbacv1.ClusterRole](t, "clusterrole.yaml")
			baseCR.Rules[0].ResourceNames = []string{tc.namespace}
			if got, want := grants(cr.Rules), grants(baseCR.Rules); !slices.Equal(got, want) {
				t.Errorf("ClusterRole grants %v, want %v", got, want)
			}
			crb := must[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding")
			if crb.RoleRef.Name != cr.Name || crb.Subjects[0].Name != sa.Name || crb.Subjects[0].Namespace != rel.Namespace {
				t.Errorf("ClusterRoleBinding %+v", crb)
			}
		})
	}
}

// pinned finds runAsUser, runAsGroup and fsGroup anywhere in a decoded object.
func pinned(v any, path string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if k == "runAsUser" || k == "runAsGroup" || k == "fsGroup" {
				out = append(out, path+"."+k)
			}
			out = append(out, pinned(v[k], path+"."+k)...)
		}
	case []any:
		for i, e := range v {
			out = append(out, pinned(e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}

// Nothing pins a uid, gid or fsGroup, in the chart (whatever the values) or in
// deploy/base: OpenShift's restricted-v2 assigns them and refuses a pod that sets its own.
// And the pod is restricted: non-root, no privilege escalation, no capabilities,
// RuntimeDefault seccomp, read-only root.
func TestNothingPinsAUid(t *testing.T) {
	for _, vs := range valueSets(t) {
		objs := render(t, vs.values)
		for _, o := range objs {
			if p := pinned(o.Object, o.GetKind()); len(p) > 0 {
				t.Errorf("the chart pins %v (values: %s)", p, vs.name)
			}
		}
		dep := must[appsv1.Deployment](t, objs, "Deployment")
		checkRestricted(t, "chart", dep.Spec.Template.Spec)
	}
	files, err := filepath.Glob(repo("deploy", "base", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/base: %v %v", files, err)
	}
	for _, f := range files {
		var m map[string]any
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if p := pinned(m, filepath.Base(f)); len(p) > 0 {
			t.Errorf("deploy/base pins %v", p)
		}
		if regexp.MustCompile(`(?m)^\s*#?\s*(runAsUser|runAsGroup|fsGroup):`).Match(b) {
			t.Errorf("%s mentions a pinned id, even if commented out", filepath.Base(f))
		}
	}
	checkRestricted(t, "deploy/base", base[appsv1.Deployment](t, "deployment.yaml").Spec.Template.Spec)
}

func checkRestricted(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v: want runAsNonRoot and RuntimeDefault seccomp", what, psc)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container %s securityContext %+v: want no privilege escalation, read-only root, drop ALL", what, c.Name, sc)
		}
	}
}

// env is the container's environment as name -> value (a valueFrom as "<from>").
func env(t *testing.T, dep appsv1.Deployment) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if _, dup := out[e.Name]; dup {
			t.Errorf("%s set twice", e.Name)
		}
		out[e.Name] = e.Value
		if e.ValueFrom != nil {
			out[e.Name] = "<from>"
		}
	}
	return out
}

// load is the service's configuration check of vars (env's), a valueFrom as the pod's name.
func load(vars map[string]string) error {
	var environ []string
	for name, v := range vars {
		if v == "<from>" {
			v = "pod-name"
		}
		environ = append(environ, name+"="+v)
	}
	_, err := config.Load(environ)
	return err
}

// Every variable the chart (and deploy/base) sets is one the service reads, and the
// chart's defaults (and the DCM-like values) make a configuration the service accepts:
// no misspelt name that the service would silently ignore, no default it refuses.
func TestEnvIsWhatTheServiceReads(t *testing.T) {
	known := map[string]bool{}
	for _, s := range config.Settings() {
		known[s.Name] = true
	}
	for _, vs := range valueSets(t) {
		dep := must[appsv1.Deployment](t, render(t, vs.values), "Deployment")
		vars := env(t, dep)
		for name := range vars {
			if !known[name] {
				t.Errorf("the chart sets %s, which the service does not read (values: %s)", name, vs.name)
			}
		}
		if strings.Contains(vs.values, "secretName") {
			continue // the token and certificate files exist only in the pod
		}
		if err := load(vars); err != nil {
			t.Errorf("the service refuses the chart's configuration (values: %s): %v", vs.name, err)
		}
	}
	for _, f := range []string{"config.env"} {
		b, err := os.ReadFile(repo("deploy", "base", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue // kustomize's env files take comments
			}
			if name, _, _ := strings.Cut(line, "="); !known[name] {
				t.Errorf("deploy/base/%s sets %s, which the service does not read", f, name)
			}
		}
	}
	for _, e := range base[appsv1.Deployment](t, "deployment.yaml").Spec.Template.Spec.Containers[0].Env {
		if !known[e.Name] {
			t.Errorf("deploy/base/deployment.yaml sets %s, which the service does not read", e.Name)
		}
	}
}

// The values DCM's chart sets become the same variables here, with the same meaning.
func TestDefaultsAreDCMs(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         map[string]string
		absent       []string
	}{
		{"defaults", "", map[string]string{
			"SP_NAME":                  "k8s-container-sp",
			"SP_ENDPOINT":              "http://dcm-k8s-container-sp.dcm.svc:8080",
			"DCM_REGISTRATION_URL":     "http://dcm-environment-agent.dcm.svc:8080/api/v1alpha1",
			"SP_NATS_URL":              "nats://dcm-nats.dcm.svc:4222",
			"SP_K8S_NAMESPACE":         "dcm-containers",
			"SP_K8S_EXTERNAL_SVC_TYPE": "NodePort",
			"SP_K8S_POD_SECURITY":      "restricted",
			"SP_MONITOR_IDENTITY":      "<from>",
		}, []string{"SP_K8S_KUBECONFIG", "SP_API_TOKEN_FILE", "SP_SERVER_TLS_CERT_FILE", "SP_SERVER_TLS_KEY_FILE", "SP_DISPLAY_NAME"}},
		{"DCM-like", string(testdata(t, "dcm-values.yaml")), map[string]string{
			"SP_NAME":                  "k8s-container-service-provider",
			"SP_ENDPOINT":              "http://dcm-k8s-container-sp.dcm.svc:8080",
			"DCM_REGISTRATION_URL":     "http://dcm-environment-agent.dcm.svc:8080/api/v1alpha1",
			"SP_NATS_URL":              "nats://dcm-nats.dcm.svc:4222",
			"SP_K8S_NAMESPACE":         "dcm-containers",
			"SP_K8S_EXTERNAL_SVC_TYPE": "NodePort",
		}, nil},
		{"TLS and token", "tls: {secretName: t}\napiToken: {secretName: a, key: api}\nspDisplayName: My SP", map[string]string{
			"SP_ENDPOINT":             "https://dcm-k8s-container-sp.dcm.svc:8080",
			"SP_API_TOKEN_FILE":       "/etc/k8s-container-sp/token/api",
			"SP_SERVER_TLS_CERT_FILE": "/etc/k8s-container-sp/tls/tls.crt",
			"SP_SERVER_TLS_KEY_FILE":  "/etc/k8s-container-sp/tls/tls.key",
			"SP_DISPLAY_NAME":         "My SP",
		}, nil},
		{"NATS credentials and TLS from a Secret", "natsAuth: {secretName: sp-nats, nkeySeedKey: nkey.seed, caKey: ca.crt, certKey: tls.crt, keyKey: tls.key}", map[string]string{
			"SP_NATS_NKEY_SEED_FILE": "/etc/k8s-container-sp/nats/nkey.seed",
			"SP_NATS_TLS_CA_FILE":    "/etc/k8s-container-sp/nats/ca.crt",
			"SP_NATS_TLS_CERT_FILE":  "/etc/k8s-container-sp/nats/tls.crt",
			"SP_NATS_TLS_KEY_FILE":   "/etc/k8s-container-sp/nats/tls.key",
		}, []string{"SP_NATS_CREDS_FILE"}},
		{"extraEnv replaces", "extraEnv: [{name: SP_K8S_POD_SECURITY, value: baseline}, {name: SP_MAX_CONTAINERS, value: '100'}]", map[string]string{
			"SP_K8S_POD_SECURITY": "baseline",
			"SP_MAX_CONTAINERS":   "100",
		}, nil},
		{"set explicitly", "spEndpoint: https://sp.example.com\nregistrationURL: http://r.dcm.svc:8080/api/v1alpha1\nnatsURL: nats://n:4222\nexternalSvcType: LoadBalancer", map[string]string{
			"SP_ENDPOINT":              "https://sp.example.com",
			"DCM_REGISTRATION_URL":     "http://r.dcm.svc:8080/api/v1alpha1",
			"SP_NATS_URL":              "nats://n:4222",
			"SP_K8S_EXTERNAL_SVC_TYPE": "LoadBalancer",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.values)
			dep := must[appsv1.Deployment](t, objs, "Deployment")
			vars := env(t, dep)
			for k, v := range tc.want {
				if vars[k] != v {
					t.Errorf("%s=%q, want %q", k, vars[k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := vars[k]; ok {
					t.Errorf("%s set (%q), want unset", k, vars[k])
				}
			}
			// The endpoint's default is the chart's own Service.
			svc := must[corev1.Service](t, objs, "Service")
			if !strings.Contains(tc.values, "spEndpoint") && !strings.HasSuffix(vars["SP_ENDPOINT"], fmt.Sprintf("://%s.%s.svc:%d", svc.Name, rel.Namespace, svc.Spec.Ports[0].Port)) {
				t.Errorf("SP_ENDPOINT %q is not Service %s", vars["SP_ENDPOINT"], svc.Name)
			}
			scheme := corev1.URISchemeHTTP
			if strings.Contains(tc.values, "tls:") {
				scheme = corev1.URISchemeHTTPS
			}
			c := dep.Spec.Template.Spec.Containers[0]
			if strings.Contains(tc.values, "natsAuth") {
				vols := dep.Spec.Template.Spec.Volumes
				if len(vols) != 1 || vols[0].Secret == nil || vols[0].Secret.SecretName != "sp-nats" ||
					len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/k8s-container-sp/nats" || c.VolumeMounts[0].SubPath != "" {
					t.Errorf("the NATS Secret is not mounted as a directory: %+v %+v", vols, c.VolumeMounts)
				}
			}
			if c.ReadinessProbe.HTTPGet.Scheme != scheme || c.LivenessProbe.HTTPGet.Scheme != scheme {
				t.Errorf("probes' scheme %s/%s, want %s", c.ReadinessProbe.HTTPGet.Scheme, c.LivenessProbe.HTTPGet.Scheme, scheme)
			}
		})
	}
}

// selectors are every label selector of the provider's own pods among objs.
func selectors(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	dep := must[appsv1.Deployment](t, objs, "Deployment")
	out["Deployment"] = dep.Spec.Selector.MatchLabels
	for i, c := range dep.Spec.Template.Spec.TopologySpreadConstraints {
		out[fmt.Sprintf("topologySpreadConstraints[%d]", i)] = c.LabelSelector.MatchLabels
	}
	if svc, ok := find[corev1.Service](t, objs, "Service"); ok {
		out["Service"] = svc.Spec.Selector
	}
	if np, ok := find[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/"+dep.Name); ok {
		out["NetworkPolicy"] = np.Spec.PodSelector.MatchLabels
	}
	if pdb, ok := find[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget"); ok {
		out["PodDisruptionBudget"] = pdb.Spec.Selector.MatchLabels
	}
	return out
}

// A tenant cannot make its container one of the provider's pods: everything that selects
// them (Service, NetworkPolicy, spread, PodDisruptionBudget) requires a label the service
// refuses in a container's labels, in the chart and in deploy/base.
func TestTenantsCannotCarryTheSelector(t *testing.T) {
	check := func(t *testing.T, what string, template map[string]string, sels map[string]map[string]string) {
		t.Helper()
		want := sels["Deployment"]
		for name, sel := range sels {
			if !maps.Equal(sel, want) {
				t.Errorf("%s: %s selects %v, the Deployment %v", what, name, sel, want)
			}
		}
		for k, v := range want {
			if template[k] != v {
				t.Errorf("%s: the pods lack their selector's %s=%s", what, k, v)
			}
		}
		// As a tenant would try it: a container whose labels are the selector.
		spec := v1alpha1.ContainerSpec{ServiceType: "container"}
		spec.Metadata.Name = "impostor"
		spec.Metadata.Labels = &want
		spec.Image.Reference = "nginx"
		refused := map[string]bool{}
		for _, v := range container.Validate(&spec, container.Policy{}) {
			for k := range want {
				if v.Pointer == container.Pointer("spec", "metadata", "labels", k) {
					refused[k] = true
				}
			}
		}
		if len(refused) == 0 {
			t.Errorf("%s: a container labelled %v, the provider's selector, is accepted", what, want)
		}
	}
	for _, values := range []string{"", "replicas: 2\nnetworkPolicy: {enabled: true}"} {
		objs := render(t, values)
		sels := selectors(t, objs)
		if values != "" && len(sels) != 5 {
			t.Errorf("selectors %v: want Deployment, spread, Service, NetworkPolicy and PodDisruptionBudget", sels)
		}
		check(t, "chart", must[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Labels, sels)
	}
	dep := base[appsv1.Deployment](t, "deployment.yaml")
	check(t, "deploy/base", dep.Spec.Template.Labels, map[string]map[string]string{
		"Deployment":          dep.Spec.Selector.MatchLabels,
		"topologySpread[0]":   dep.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels,
		"Service":             base[corev1.Service](t, "service.yaml").Spec.Selector,
		"NetworkPolicy":       base[networkingv1.NetworkPolicy](t, "networkpolicy.yaml").Spec.PodSelector.MatchLabels,
		"PodDisruptionBudget": base[policyv1.PodDisruptionBudget](t, "poddisruptionbudget.yaml").Spec.Selector.MatchLabels,
	})
}

// A values file with a wrong type, or a value the chart does not know, is refused before
// anything renders, and the error names the field.
func TestWrongValuesAreRefusedByName(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		field        []string // what the error must name
	}{
		{"testdata/wrong-type.yaml", string(testdata(t, "wrong-type.yaml")), []string{"/replicas"}},
		{"integer as string", "replicas: two", []string{"/replicas", "integer"}},
		{"nested", "image: {tag: 3}", []string{"/image/tag", "string"}},
		{"boolean", "networkPolicy: {enabled: yes please}", []string{"/networkPolicy/enabled", "boolean"}},
		{"unknown top-level", "replica: 2", []string{"replica"}},
		{"unknown nested", "image: {name: x}", []string{"/image", "name"}},
		{"enum", "externalSvcType: ClusterIP", []string{"/externalSvcType"}},
		{"pod security", "podSecurity: privileged", []string{"/podSecurity"}},
		{"namespace", "namespace: Not_A_Name", []string{"/namespace"}},
		{"extraEnv", "extraEnv: [{value: x}]", []string{"/extraEnv/0", "name"}},
		// The service refuses it (its leader ConfigMap, MySP-status, is no object name):
		// installed, the pod would crash-loop.
		{"spName", "spName: MySP", []string{"/spName"}},
		{"registrationURL", "registrationURL: dcm-environment-agent:8080", []string{"/registrationURL"}},
		{"natsURL", "natsURL: http://dcm-nats:4222", []string{"/natsURL"}},
		{"dcmRelease", "dcmRelease: DCM", []string{"/dcmRelease"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(rel, []byte(tc.values))
			if err == nil {
				t.Fatalf("values %q rendered", tc.values)
			}
			for _, f := range tc.field {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("the error does not name %q: %v", f, err)
				}
			}
		})
	}
}

// kubeconfigRef mounts the Secret read-only at /kubeconfig and points SP_K8S_KUBECONFIG
// at its key "kubeconfig", as DCM's chart; the provider then acts with that kubeconfig's
// credentials, so the chart creates no Role and mounts no service account token.
func TestKubeconfigRef(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		ref          string
	}{
		{"none", "", ""},
		{"set", "kubeconfigRef: sp-kubeconfig", "sp-kubeconfig"},
		{"with token and TLS", everything, "sp-kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.values)
			dep := must[appsv1.Deployment](t, objs, "Deployment")
			pod := dep.Spec.Template.Spec
			vars := env(t, dep)
			var vol *corev1.Volume
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == "kubeconfig" {
					vol = &pod.Volumes[i]
				}
			}
			var mount *corev1.VolumeMount
			for i, m := range pod.Containers[0].VolumeMounts {
				if m.Name == "kubeconfig" {
					mount = &pod.Containers[0].VolumeMounts[i]
				}
			}
			_, hasRole := find[rbacv1.Role](t, objs, "Role")
			if tc.ref == "" {
				if vol != nil || mount != nil || vars["SP_K8S_KUBECONFIG"] != "" || !hasRole ||
					pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
					t.Errorf("without kubeconfigRef: volume %v, mount %v, env %q, Role %v, automount %v",
						vol, mount, vars["SP_K8S_KUBECONFIG"], hasRole, pod.AutomountServiceAccountToken)
				}
				return
			}
			if vol == nil || vol.Secret == nil || vol.Secret.SecretName != tc.ref {
				t.Errorf("volume %+v, want Secret %s", vol, tc.ref)
			}
			if mount == nil || mount.MountPath != "/kubeconfig" || !mount.ReadOnly || mount.SubPath != "" {
				t.Errorf("mount %+v, want /kubeconfig read-only (no subPath, so the kubelet updates it)", mount)
			}
			if vars["SP_K8S_KUBECONFIG"] != "/kubeconfig/kubeconfig" {
				t.Errorf("SP_K8S_KUBECONFIG=%q", vars["SP_K8S_KUBECONFIG"])
			}
			if hasRole || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("with kubeconfigRef: Role %v, automount %v: want neither", hasRole, pod.AutomountServiceAccountToken)
			}
		})
	}
}

// Replicas, the PodDisruptionBudget (only with more than one), the provider's
// NetworkPolicy (on by default, admitting DCM's namespace) and the spread follow the
// values.
func TestReplicasAndPolicies(t *testing.T) {
	for _, tc := range []struct {
		values   string
		replicas int32
		pdb, np  bool
		npFrom   string
	}{
		{"", 1, false, true, "dcm"},
		{"replicas: 2", 2, true, true, "dcm"},
		{"replicas: 2\npodDisruptionBudget: {enabled: false}", 2, false, true, "dcm"},
		{"networkPolicy: {enabled: false}", 1, false, false, ""},
		{"dcmNamespace: dcm-system", 1, false, true, "dcm-system"},
		{"networkPolicy: {enabled: true, from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: control}}}]}", 1, false, true, "control"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			objs := render(t, tc.values)
			dep := must[appsv1.Deployment](t, objs, "Deployment")
			if *dep.Spec.Replicas != tc.replicas {
				t.Errorf("replicas %d, want %d", *dep.Spec.Replicas, tc.replicas)
			}
			if _, ok := find[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget"); ok != tc.pdb {
				t.Errorf("PodDisruptionBudget rendered: %v, want %v", ok, tc.pdb)
			}
			np, ok := find[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/dcm-k8s-container-sp")
			if ok != tc.np {
				t.Fatalf("NetworkPolicy rendered: %v, want %v", ok, tc.np)
			}
			if ok && (len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 ||
				np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != tc.npFrom ||
				np.Spec.Ingress[0].Ports[0].Port.String() != "http") {
				t.Errorf("NetworkPolicy %+v: want ingress from namespace %s on port http only", np.Spec, tc.npFrom)
			}
		})
	}
}

// The chart and the kustomize base deploy the same pod: probes, port, resources, grace
// period, spread.
func TestChartAgreesWithKustomize(t *testing.T) {
	chartPod := must[appsv1.Deployment](t, render(t, ""), "Deployment").Spec.Template.Spec
	basePod := base[appsv1.Deployment](t, "deployment.yaml").Spec.Template.Spec
	c, b := chartPod.Containers[0], basePod.Containers[0]
	for _, d := range []struct {
		what       string
		chart, kus any
	}{
		{"readiness path", c.ReadinessProbe.HTTPGet.Path, b.ReadinessProbe.HTTPGet.Path},
		{"readiness period", c.ReadinessProbe.PeriodSeconds, b.ReadinessProbe.PeriodSeconds},
		{"liveness path", c.LivenessProbe.HTTPGet.Path, b.LivenessProbe.HTTPGet.Path},
		{"liveness period", c.LivenessProbe.PeriodSeconds, b.LivenessProbe.PeriodSeconds},
		{"liveness failures", c.LivenessProbe.FailureThreshold, b.LivenessProbe.FailureThreshold},
		{"ports", fmt.Sprint(c.Ports[0].Name, c.Ports[0].ContainerPort), fmt.Sprint(b.Ports[0].Name, b.Ports[0].ContainerPort)},
		{"resources", c.Resources.String(), b.Resources.String()},
		{"grace period", *chartPod.TerminationGracePeriodSeconds, *basePod.TerminationGracePeriodSeconds},
		{"spread", fmt.Sprint(chartPod.TopologySpreadConstraints[0].TopologyKey, chartPod.TopologySpreadConstraints[0].WhenUnsatisfiable),
			fmt.Sprint(basePod.TopologySpreadConstraints[0].TopologyKey, basePod.TopologySpreadConstraints[0].WhenUnsatisfiable)},
	} {
		if fmt.Sprint(d.chart) != fmt.Sprint(d.kus) {
			t.Errorf("%s: chart %v, deploy/base %v", d.what, d.chart, d.kus)
		}
	}
}

// The helm the Makefile builds (make lint) is the version these tests render with.
func TestMakefileHelmIsTheLibrarysVersion(t *testing.T) {
	mk, err := os.ReadFile(repo("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HELM_VERSION\s*:?=\s*(\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no HELM_VERSION")
	}
	gomod, err := os.ReadFile(repo("tools", "devenv", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	lib := regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v3 (\S+)`).FindSubmatch(gomod)
	if lib == nil {
		t.Fatal("tools/devenv/go.mod does not require helm.sh/helm/v3")
	}
	if string(lib[1]) != string(m[1]) {
		t.Errorf("the Makefile builds helm %s, tools/devenv/go.mod requires %s: keep them equal", m[1], lib[1])
	}
}

// dcmRole is the Role DCM's own chart (deploy/helm/dcm, block k8sContainerServiceProvider)
// gives the container provider, verbatim: no Leases, nothing cluster-wide.
const dcmRole = `
rules:
  - apiGroups: [""]
    resources: ["pods", "services", "configmaps", "secrets", "persistentvolumeclaims"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  - apiGroups: ["apps"]
    resources: ["deployments", "statefulsets", "replicasets"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["get", "list", "watch"]
`

// The chart's default Role asks for nothing DCM's Role does not grant: the provider works
// where DCM deploys it, with DCM's Role.
func TestRoleIsWithinDCMs(t *testing.T) {
	var dcm rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(dcmRole), &dcm); err != nil {
		t.Fatal(err)
	}
	granted := grants(dcm.Rules)
	for _, tc := range []struct{ name, values string }{
		{"defaults", ""},
		{"testdata/dcm-values.yaml", string(testdata(t, "dcm-values.yaml"))},
	} {
		role := must[rbacv1.Role](t, render(t, tc.values), "Role")
		for _, g := range grants(role.Rules) {
			if !slices.Contains(granted, g) {
				t.Errorf("%s: the chart's Role grants %s, which DCM's Role does not", tc.name, g)
			}
		}
	}
}

// What the service checks at start, the schema checks at install: a value the service
// would refuse (the pod crash-looping after a successful install) is refused by helm
// install, and a value it accepts is not refused. Each value is rendered alone; where the
// schema accepts it, the service's configuration check runs on the rendered environment.
func TestSchemaRefusesWhatTheServiceRefuses(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		value  string
		values []string
	}{
		{"spName", []string{"k8s-container-sp", "MySP", "a", "a-", "a.b", "a.b-", "a.", ".a", "-a", "a..b", "a_b", "a b",
			"dcm-container-sp", "dcm-containers", "my-dcm-container-sp", long(246), long(247), long(60) + "." + long(60)}},
		{"namespace", []string{"tenants", "Tenants", "a-", "-a", "a.b", long(63), long(64)}},
		{"spEndpoint", []string{"http://sp:8080", "https://sp.example.com/x", "ftp://sp", "http://", "http:///x", "sp:8080"}},
		{"registrationURL", []string{"http://a:8080/api/v1alpha1", "https://a", "ftp://a", "http://", "http:///x", "a:8080"}},
		{"natsURL", []string{"nats://n:4222", "tls://n:4222", "ws://n", "wss://n", "nats://a:4222,nats://b:4222",
			"nats://a:4222, nats://b:4222", "nats://u:p@n:4222", "http://n", "nats://", "n:4222", "nats://a,", "nats://a,http://b"}},
		{"externalSvcType", []string{"NodePort", "LoadBalancer", "None", "ClusterIP"}},
	} {
		for _, v := range tc.values {
			t.Run(tc.value+"="+v, func(t *testing.T) {
				values, err := yaml.Marshal(map[string]string{tc.value: v})
				if err != nil {
					t.Fatal(err)
				}
				objs, renderErr := Render(rel, values)
				var serviceErr error
				if renderErr == nil {
					serviceErr = load(env(t, must[appsv1.Deployment](t, objs, "Deployment")))
				} else if !strings.Contains(renderErr.Error(), "/"+tc.value) {
					t.Errorf("refused without naming /%s: %v", tc.value, renderErr)
				}
				// The schema refused it: would the service have? Its check, on the
				// defaults' environment with this one variable changed.
				if renderErr != nil {
					vars := env(t, must[appsv1.Deployment](t, render(t, ""), "Deployment"))
					vars[map[string]string{
						"spName": "SP_NAME", "namespace": "SP_K8S_NAMESPACE", "spEndpoint": "SP_ENDPOINT",
						"registrationURL": "DCM_REGISTRATION_URL", "natsURL": "SP_NATS_URL", "externalSvcType": "SP_K8S_EXTERNAL_SVC_TYPE",
					}[tc.value]] = v
					serviceErr = load(vars)
					if serviceErr == nil {
						t.Errorf("the schema refuses %s=%q, which the service accepts: %v", tc.value, v, renderErr)
					}
					return
				}
				if serviceErr != nil {
					t.Errorf("the chart installs %s=%q, which the service refuses at start: %v", tc.value, v, serviceErr)
				}
			})
		}
	}
}

// Without registrationURL and natsURL, the chart derives them from DCM's release and
// namespace (dcmRelease, default dcm; dcmNamespace, default the release namespace), not
// from its own release's name: today's DCM's environment agent and NATS. Set, they win.
func TestDerivedURLs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rel       Release
		values    string
		reg, nats string
	}{
		{"own name, DCM's namespace", Release{"k8s-container-sp", "dcm"}, "",
			"http://dcm-environment-agent.dcm.svc:8080/api/v1alpha1", "nats://dcm-nats.dcm.svc:4222"},
		{"another namespace", Release{"k8s-container-sp", "providers"}, "dcmNamespace: dcm",
			"http://dcm-environment-agent.dcm.svc:8080/api/v1alpha1", "nats://dcm-nats.dcm.svc:4222"},
		{"DCM under another name", Release{"sp", "providers"}, "dcmRelease: prod\ndcmNamespace: dcm-prod",
			"http://prod-environment-agent.dcm-prod.svc:8080/api/v1alpha1", "nats://prod-nats.dcm-prod.svc:4222"},
		{"the older DCM, set", Release{"sp", "dcm"}, "registrationURL: http://dcm-control-plane.dcm.svc:8080/api/v1alpha1",
			"http://dcm-control-plane.dcm.svc:8080/api/v1alpha1", "nats://dcm-nats.dcm.svc:4222"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Render(tc.rel, []byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			vars := env(t, must[appsv1.Deployment](t, objs, "Deployment"))
			if vars["DCM_REGISTRATION_URL"] != tc.reg || vars["SP_NATS_URL"] != tc.nats {
				t.Errorf("DCM_REGISTRATION_URL=%q SP_NATS_URL=%q, want %q and %q", vars["DCM_REGISTRATION_URL"], vars["SP_NATS_URL"], tc.reg, tc.nats)
			}
		})
	}
}

// The notes helm install prints say where the provider registers and publishes, and warn
// when those URLs are derived rather than set; derived, they name the agent's
// embeddedSps and the older DCM's URL. Set by the values (registrationURL, natsURL, or
// the variables themselves in extraEnv, which win), the notes show the URLs the service
// is given, unmarked, and warn of nothing.
func TestNotesSayWhereItRegisters(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want, not    []string
	}{
		{"derived", "", []string{
			"Registers with:            http://dcm-environment-agent.dcm.svc:8080/api/v1alpha1 (derived)\n",
			"Status events to:          nats://dcm-nats.dcm.svc:4222 (derived)\n",
			"WARNING: registrationURL and natsURL are not set: derived from dcmRelease=dcm and\ndcmNamespace=dcm,",
			"embeddedSps", "-control-plane.",
		}, nil},
		{"registration set", "registrationURL: http://dcm-control-plane.dcm.svc:8080/api/v1alpha1", []string{
			"Registers with:            http://dcm-control-plane.dcm.svc:8080/api/v1alpha1\n",
			"WARNING: natsURL is not set",
		}, []string{"embeddedSps"}},
		{"both set", "registrationURL: http://a:8080/api/v1alpha1\nnatsURL: nats://n:4222", []string{
			"Registers with:            http://a:8080/api/v1alpha1\n",
			"Status events to:          nats://n:4222\n",
		}, []string{"WARNING", "(derived)"}},
		{"all three set in extraEnv", `extraEnv:
- {name: SP_ENDPOINT, value: "http://sp.example:8080"}
- {name: DCM_REGISTRATION_URL, value: "http://reg.example:8080/api/v1alpha1"}
- {name: SP_NATS_URL, value: "nats://nats.example:4222"}`, []string{
			"Endpoint (SP_ENDPOINT):    http://sp.example:8080\n",
			"Registers with:            http://reg.example:8080/api/v1alpha1\n",
			"Status events to:          nats://nats.example:4222\n",
		}, []string{"WARNING", "(derived)", "embeddedSps", "dcm-environment-agent", "dcm-nats", ".svc:8080\n"}},
		{"extraEnv wins over the value", "registrationURL: http://a:8080/api/v1alpha1\n" +
			`extraEnv: [{name: DCM_REGISTRATION_URL, value: "http://b:8080/api/v1alpha1"}]`, []string{
			"Registers with:            http://b:8080/api/v1alpha1\n",
			"WARNING: natsURL is not set",
		}, []string{"http://a:8080", "registrationURL and natsURL", "embeddedSps"}},
		{"registration from a Secret", `extraEnv:
- name: DCM_REGISTRATION_URL
  valueFrom: {secretKeyRef: {name: dcm-urls, key: registration}}`, []string{
			"Registers with:            extraEnv's DCM_REGISTRATION_URL (valueFrom)\n",
			"Status events to:          nats://dcm-nats.dcm.svc:4222 (derived)\n",
			"WARNING: natsURL is not set",
		}, []string{"dcm-environment-agent", "embeddedSps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes, err := Notes(rel, []byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("the notes do not say %q:\n%s", w, notes)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(notes, n) {
					t.Errorf("the notes say %q:\n%s", n, notes)
				}
			}
		})
	}
}
