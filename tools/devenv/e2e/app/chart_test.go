package app_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/chart"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// The Helm chart renders objects the apiserver accepts (a server-side dry run of each,
// every optional part on): what tools/devenv/chart checks offline is also valid
// Kubernetes. Installing it as a pod is make deploy's and its tests' part.
func TestChartManifestsAreValid(t *testing.T) {
	ns := testenv.Namespace(t)
	env := testenv.Cluster(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resources := map[string]struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}{
		"ServiceAccount":      {schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true},
		"Service":             {schema.GroupVersionResource{Version: "v1", Resource: "services"}, true},
		"Role":                {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, true},
		"RoleBinding":         {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, true},
		"ClusterRole":         {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, false},
		"ClusterRoleBinding":  {schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, false},
		"Deployment":          {schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		"NetworkPolicy":       {schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, true},
		"PodDisruptionBudget": {schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, true},
		"LimitRange":          {schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}, true},
		"ResourceQuota":       {schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, true},
	}
	// The containers' namespace, by default <release namespace>-containers, exists
	// already (the chart makes it only with createNamespace).
	containers := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-containers"}}
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), containers, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), containers.Name, metav1.DeleteOptions{})
	})
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, tc := range []struct{ name, values string }{
		{"defaults", ""},
		{"everything", "replicas: 2\napiToken: {secretName: t}\ntls: {secretName: c}\nnamespaceReader: {enabled: true}\n" +
			"networkPolicy: {enabled: true}\npodSecurity: auto\nextraEnv: [{name: SP_MAX_CONTAINERS, value: '100'}]\n" +
			"natsAuth: {secretName: sp-nats, nkeySeedKey: seed, caKey: ca.crt}"},
		{"kubeconfigRef", "kubeconfigRef: k\nreplicas: 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := chart.Render(chart.Release{Name: "sp", Namespace: ns}, []byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				r, ok := resources[o.GetKind()]
				if !ok {
					t.Errorf("the chart renders a %s: add it here", o.GetKind())
					continue
				}
				var err error
				if r.namespaced {
					_, err = dyn.Resource(r.gvr).Namespace(o.GetNamespace()).Create(context.Background(), o, dry)
				} else {
					_, err = dyn.Resource(r.gvr).Create(context.Background(), o, dry)
				}
				if err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}
}
