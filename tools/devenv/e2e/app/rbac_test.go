package app_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

const deployDir = "../../../../deploy/base"

func manifest[T runtime.Object](t *testing.T, file string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, file))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	typed, ok := obj.(T)
	if !ok {
		t.Fatalf("%s holds a %T", file, obj)
	}
	return typed
}

// The service runs with exactly the RBAC of deploy/base (ServiceAccount token, namespaced
// Role): every API operation and status event works, and the same identity cannot
// touch another namespace.
// asRole runs the provider as deploy/base's ServiceAccount, bound (by deploy/base's
// RoleBinding) to role in ns.
func asRole(t *testing.T, ns string, role *rbacv1.Role) providerOpt {
	t.Helper()
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	sa := manifest[*corev1.ServiceAccount](t, "serviceaccount.yaml")
	binding := manifest[*rbacv1.RoleBinding](t, "rolebinding.yaml")
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return func(_ *config.Config, rc *rest.Config) { rc.BearerToken, rc.BearerTokenFile = tok.Status.Token, "" }
}

// withNamespaceReader applies deploy/base's ClusterRole and ClusterRoleBinding for ns
// (get on that one namespace), as kustomize would with namespace ns.
func withNamespaceReader(t *testing.T, ns string) {
	t.Helper()
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	cr := manifest[*rbacv1.ClusterRole](t, "clusterrole.yaml")
	crb := manifest[*rbacv1.ClusterRoleBinding](t, "clusterrolebinding.yaml")
	cr.Name, crb.Name, crb.RoleRef.Name = ns+"-reader", ns+"-reader", ns+"-reader"
	cr.Rules[0].ResourceNames = []string{ns}
	crb.Subjects[0].Namespace = ns
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
	})
}

func TestDeployRBACIsEnough(t *testing.T) {
	ns := testenv.Namespace(t)
	ctx := context.Background()
	asSA := asRole(t, ns, manifest[*rbacv1.Role](t, "role.yaml"))
	withNamespaceReader(t, ns)

	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	images := newLocalRegistry(t)
	images.push(t, "nginx")
	p := startProvider(t, ns, withNATS(srv.URL), withEnv(append(images.env(), "SP_MONITOR_DEBOUNCE_MS=100")...), asSA)
	p.waitSynced(t)
	testenv.Eventually(t, 30*time.Second, "leading with the Role's ConfigMap rights", func() error {
		if !p.App.Leading() {
			return fmt.Errorf("not leading")
		}
		return nil
	})

	// An image pushed after the create: held, then pinned with the Role's patch.
	create(t, p, "rbac-held", spec("held", "quay.io/example/later:v1"))
	events.waitStatus("rbac-held", "PENDING", "The image is not resolved yet", 30*time.Second)
	digest := images.push(t, "quay.io/example/later:v1")
	events.waitStatus("rbac-held", "RUNNING", "", 60*time.Second)
	if got := deploymentOf(t, ns, "rbac-held").Spec.Template.Spec.Containers[0].Image; got != "quay.io/example/later@"+digest {
		t.Errorf("the held Deployment names %s", got)
	}
	if r := do(t, http.MethodDelete, p.URL+containers+"/rbac-held", nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	events.waitStatus("rbac-held", "DELETED", "", 30*time.Second)

	create(t, p, "rbac-1", spec("web", "nginx", withPorts(port(80, "external"), port(443, "external"))))
	events.waitStatus("rbac-1", "RUNNING", "", 30*time.Second)
	if r := do(t, http.MethodGet, p.URL+containers+"/rbac-1", nil); r.Status != 200 || r.JSON["service"] == nil {
		t.Errorf("GET: %d %s", r.Status, r.Body)
	}
	if r := do(t, http.MethodGet, p.URL+containers, nil); r.Status != 200 || len(r.JSON["containers"].([]any)) != 1 {
		t.Errorf("LIST: %d %s", r.Status, r.Body)
	}
	if r := do(t, http.MethodPost, p.URL+containers+"?id=rbac-1", spec("web", "nginx")); r.Status != http.StatusConflict {
		t.Errorf("duplicate: %d %s", r.Status, r.Body)
	}
	if r := do(t, http.MethodGet, p.URL+"/health", nil); r.JSON["status"] != "healthy" {
		t.Errorf("health: %s", r.Body)
	}
	if r := do(t, http.MethodDelete, p.URL+containers+"/rbac-1", nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	events.waitStatus("rbac-1", "DELETED", "", 30*time.Second)
	expectNothing(t, ns) // the finalizer was removed with the Role's rights
	if logs := p.Logs(); strings.Contains(logs, "forbidden") {
		t.Errorf("the provider hit a forbidden call:\n%s", logs)
	}

	// The same identity has no rights anywhere else.
	other := testenv.Namespace(t)
	rc := rest.CopyConfig(testenv.Cluster(t).Config)
	asSA(nil, rc)
	saClient, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saClient.AppsV1().Deployments(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list in another namespace: %v, want forbidden", err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}}
	if _, err := saClient.AppsV1().Deployments(other).Create(ctx, dep, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create in another namespace: %v, want forbidden", err)
	}
	if _, err := saClient.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a pod: %v, want forbidden (pods are read-only)", err)
	}
	if _, err := saClient.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("read secrets: %v, want forbidden", err)
	}
}

// dcmRole is DCM's Role (testdata/dcm-role.yaml) verbatim, named as deploy/base's
// RoleBinding refers to it.
func dcmRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	b, err := os.ReadFile("testdata/dcm-role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	role, ok := obj.(*rbacv1.Role)
	if !ok {
		t.Fatalf("dcm-role.yaml holds a %T", obj)
	}
	role.Name = manifest[*rbacv1.RoleBinding](t, "rolebinding.yaml").RoleRef.Name
	return role
}

// Issue 25: DCM's own chart grants no Leases. With exactly its Role (one replica, no
// namespace reader), the provider keeps its records and its election on ConfigMaps: it
// says so at start, is healthy and ready, answers 201, 409 to a concurrent duplicate,
// 204, and delivers the status events, DELETED included.
func TestDCMRoleIsEnough(t *testing.T) {
	ns := testenv.Namespace(t)
	asSA := asRole(t, ns, dcmRole(t))
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"), asSA)
	p.waitSynced(t)
	testenv.Eventually(t, 30*time.Second, "leading on the ConfigMap lock", func() error {
		if !p.App.Leading() {
			return fmt.Errorf("not leading")
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "healthy and ready", func() error {
		if h := do(t, http.MethodGet, p.URL+"/health", nil); h.JSON["status"] != "healthy" {
			return fmt.Errorf("health: %s", h.Body)
		}
		if r := do(t, http.MethodGet, p.URL+"/readyz", nil); r.Status != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", r.Status, r.Body)
		}
		return nil
	})

	create(t, p, "dcm-1", spec("web", "nginx", withPorts(port(80, "internal"))))
	events.waitStatus("dcm-1", "RUNNING", "", 30*time.Second)
	// A concurrent duplicate: exactly one 201, one 409.
	codes := make(chan int, 2)
	for range 2 {
		go func() { codes <- do(t, http.MethodPost, p.URL+containers+"?id=dcm-2", spec("web", "nginx")).Status }()
	}
	got := []int{<-codes, <-codes}
	slices.Sort(got)
	if !slices.Equal(got, []int{http.StatusCreated, http.StatusConflict}) {
		t.Errorf("concurrent duplicate creates answered %v, want one 201 and one 409", got)
	}
	events.waitStatus("dcm-2", "RUNNING", "", 30*time.Second)
	for _, id := range []string{"dcm-1", "dcm-2"} {
		if r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil); r.Status != http.StatusNoContent {
			t.Fatalf("DELETE %s: %d %s", id, r.Status, r.Body)
		}
	}
	for _, id := range []string{"dcm-1", "dcm-2"} {
		events.waitStatus(id, "DELETED", "", 30*time.Second)
	}
	expectNothing(t, ns) // the records' finalizers came off with the Role's rights
	if logs := p.Logs(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("an ERROR under DCM's Role:\n%s", logs)
	}
}

// Issue 25: two replicas under DCM's Role publish once: exactly one leads (on the
// ConfigMap lock), and each state of a container is sent once.
func TestDCMRoleTwoReplicasPublishOnce(t *testing.T) {
	ns := testenv.Namespace(t)
	asSA := asRole(t, ns, dcmRole(t))
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	a := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"), asSA)
	b := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"), asSA)
	a.waitSynced(t)
	b.waitSynced(t)
	var leader *provider
	testenv.Eventually(t, 30*time.Second, "one leader", func() error {
		switch {
		case a.App.Leading() && !b.App.Leading():
			leader = a
		case b.App.Leading() && !a.App.Leading():
			leader = b
		default:
			return fmt.Errorf("leading: a=%v b=%v", a.App.Leading(), b.App.Leading())
		}
		return nil
	})
	create(t, a, "via-a", spec("via-a", "nginx"))
	create(t, b, "via-b", spec("via-b", "nginx"))
	events.waitStatus("via-a", "RUNNING", "", 30*time.Second)
	events.waitStatus("via-b", "RUNNING", "", 30*time.Second)
	leader.waitIdle(t)
	for range 10 { // and it stays one, across renewals
		if a.App.Leading() == b.App.Leading() {
			t.Fatalf("leading: a=%v b=%v", a.App.Leading(), b.App.Leading())
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, id := range []string{"via-a", "via-b"} {
		seen := map[string]bool{}
		for _, e := range events.events(id) {
			if seen[state(e.Data)] {
				t.Errorf("%s: %+v sent twice: %+v", id, e.Data, events.events(id))
			}
			seen[state(e.Data)] = true
		}
	}
	// The lock is a ConfigMap without the records' labels: never taken for a record.
	lock, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "k8s-container-sp-status", metav1.GetOptions{})
	if err != nil || len(lock.Labels) != 0 || lock.Annotations["control-plane.alpha.kubernetes.io/leader"] == "" {
		t.Errorf("the lock ConfigMap: %v %v", lock, err)
	}
}

// SP_K8S_POD_SECURITY=auto: a namespace enforcing Pod Security "restricted" gets the
// restricted profile without being told (its pods are admitted); baseline or no label
// gets baseline, whose pods the baseline level admits too. Run with deploy/base's RBAC.
func TestPodSecurityFollowsTheNamespace(t *testing.T) {
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	for _, level := range []string{"restricted", "baseline", ""} {
		t.Run("enforce="+level, func(t *testing.T) {
			ns := testenv.Namespace(t)
			if level != "" {
				n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				n.Labels["pod-security.kubernetes.io/enforce"] = level
				if _, err := cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			asSA := asRole(t, ns, manifest[*rbacv1.Role](t, "role.yaml"))
			withNamespaceReader(t, ns)
			srv := testenv.NATS(t)
			events := newSink(t, srv.URL)
			p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"), asSA)
			p.waitSynced(t)
			create(t, p, "psa", spec("web", "nginx"))
			events.waitStatus("psa", "RUNNING", "", 30*time.Second) // the pod was admitted
			sc := deploymentOf(t, ns, "psa").Spec.Template.Spec.Containers[0].SecurityContext
			restricted := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
			if restricted != (level == "restricted") {
				t.Errorf("restricted profile = %v for enforce=%q", restricted, level)
			}
		})
	}
}

// The Deployment and Service of deploy/base are valid for the apiserver (server-side dry
// run) and the shipped configuration loads.
func TestDeployManifestsAreValid(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dep := manifest[*appsv1.Deployment](t, "deployment.yaml")
	if *dep.Spec.Replicas != 2 || dep.Spec.Template.Spec.Containers[0].ReadinessProbe == nil ||
		!*dep.Spec.Template.Spec.SecurityContext.RunAsNonRoot || !*dep.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("deployment: %+v", dep.Spec)
	}
	// kustomize fills the ConfigMap name and image; the apiserver needs them concrete.
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, dry); err != nil {
		t.Errorf("deployment.yaml: %v", err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, manifest[*corev1.Service](t, "service.yaml"), dry); err != nil {
		t.Errorf("service.yaml: %v", err)
	}
	// The NetworkPolicy admits to the provider's pods (selected by the label tenants
	// cannot set, as the Deployment selects them), on the API port only.
	np := manifest[*networkingv1.NetworkPolicy](t, "networkpolicy.yaml")
	if !maps.Equal(np.Spec.PodSelector.MatchLabels, dep.Spec.Selector.MatchLabels) ||
		len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector == nil ||
		len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != dep.Spec.Template.Spec.Containers[0].Ports[0].Name {
		t.Errorf("networkpolicy.yaml: %+v", np.Spec)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, dry); err != nil {
		t.Errorf("networkpolicy.yaml: %v", err)
	}
	pdb := manifest[*policyv1.PodDisruptionBudget](t, "poddisruptionbudget.yaml")
	if !maps.Equal(pdb.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels) {
		t.Errorf("poddisruptionbudget.yaml selects %v, the Deployment %v", pdb.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels)
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, dry); err != nil {
		t.Errorf("poddisruptionbudget.yaml: %v", err)
	}
	// kustomize applies only what kustomization.yaml lists; the ClusterRole and its
	// binding are optional (SP_K8S_POD_SECURITY=auto), as the chart's namespaceReader.
	optional := map[string]bool{"clusterrole.yaml": true, "clusterrolebinding.yaml": true}
	kustomization, err := os.ReadFile(filepath.Join(deployDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !optional[name] && !strings.Contains(string(kustomization), "\n- "+name+"\n") {
			t.Errorf("%s is not a resource in kustomization.yaml", name)
		}
	}
	f, err := os.Open(filepath.Join(deployDir, "config.env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var environ []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			environ = append(environ, line)
		}
	}
	if _, err := config.Load(append(environ, "SP_K8S_NAMESPACE=dcm-containers")); err != nil {
		t.Errorf("config.env: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
