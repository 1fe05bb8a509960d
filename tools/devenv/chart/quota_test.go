package chart

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/dcm-project/k8s-container-sp/internal/config"
)

// The chart and deploy/base ship the same LimitRange and ResourceQuota for the
// containers' namespace, on by default, and the LimitRange holds containers to the
// service's own default bounds.
func TestContainerQuotaMatchesKustomize(t *testing.T) {
	chart, base := render(t, ""), krustomize(t)
	cl, _ := find[corev1.LimitRange](t, chart, "LimitRange")
	bl, ok := find[corev1.LimitRange](t, base, "LimitRange")
	if !ok || !equality.Semantic.DeepEqual(cl.Spec, bl.Spec) {
		t.Errorf("LimitRange: the chart renders %+v, deploy/base has %+v", cl.Spec, bl.Spec)
	}
	cq, _ := find[corev1.ResourceQuota](t, chart, "ResourceQuota")
	bq, ok := find[corev1.ResourceQuota](t, base, "ResourceQuota")
	if !ok || !equality.Semantic.DeepEqual(cq.Spec, bq.Spec) {
		t.Errorf("ResourceQuota: the chart renders %+v, deploy/base has %+v", cq.Spec, bq.Spec)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourcePods, "services.nodeports", "services.loadbalancers",
		corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory} {
		if _, ok := cq.Spec.Hard[name]; !ok {
			t.Errorf("the ResourceQuota bounds no %s", name)
		}
	}
	if bl.Namespace != "dcm-containers" || bq.Namespace != "dcm-containers" {
		t.Errorf("deploy/base puts them in %q and %q, want the containers' namespace", bl.Namespace, bq.Namespace)
	}

	c, err := config.Load([]string{"SP_ENDPOINT=http://x:8080", "SP_NAME=x", "DCM_REGISTRATION_URL=http://r/api/v1alpha1", "SP_NATS_URL=nats://n:4222"})
	if err != nil {
		t.Fatal(err)
	}
	p, lim := c.Policy(), cl.Spec.Limits[0]
	ratio := func(r corev1.ResourceName) float64 { q := lim.MaxLimitRequestRatio[r]; return q.AsApproximateFloat64() }
	if lim.Max.Cpu().Cmp(p.MaxCPU) != 0 || lim.Max.Memory().Cmp(p.MaxMemory) != 0 ||
		ratio(corev1.ResourceCPU) != p.MaxCPURatio || ratio(corev1.ResourceMemory) != p.MaxMemoryRatio {
		t.Errorf("the LimitRange %+v is not the service's bounds (max cpu %s, memory %s, ratios %g, %g)",
			lim, p.MaxCPU.String(), p.MaxMemory.String(), p.MaxCPURatio, p.MaxMemoryRatio)
	}
}

// deploy/base and the chart install with the same security defaults: the external
// Service type, the pod security profile, no cluster-wide grant, and the containers'
// NetworkPolicies, LimitRange and ResourceQuota (compared above and in
// TestContainerPoliciesMatchKustomize).
func TestKustomizeSharesTheChartsSecurityDefaults(t *testing.T) {
	chartDep, _ := find[appsv1.Deployment](t, render(t, ""), "Deployment")
	chartEnv := env(t, chartDep)
	raw, err := os.ReadFile(repo("deploy", "base", "config.env"))
	if err != nil {
		t.Fatal(err)
	}
	baseEnv := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			baseEnv[k] = v
		}
	}
	for _, k := range []string{"SP_K8S_EXTERNAL_SVC_TYPE", "SP_K8S_POD_SECURITY", "SP_K8S_MIXED_VISIBILITY", "SP_IMAGE_REGISTRIES"} {
		if chartEnv[k] != baseEnv[k] {
			t.Errorf("%s: the chart sets %q, deploy/base %q", k, chartEnv[k], baseEnv[k])
		}
	}
	for _, o := range krustomize(t) {
		if k := o.GetKind(); k == "ClusterRole" || k == "ClusterRoleBinding" {
			t.Errorf("deploy/base grants %s %s: the chart grants nothing cluster-wide by default", k, o.GetName())
		}
	}
}
