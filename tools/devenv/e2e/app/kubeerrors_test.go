package app_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// An admission policy in the cluster refuses the Deployment: 400 with the cluster's
// reason, nothing left behind.
func TestClusterRefusalIsBadRequest(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	name := "deny-forbidden-images-" + ns
	reason := metav1.StatusReasonInvalid
	_, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: "object.spec.template.spec.containers.all(c, !c.image.startsWith('forbidden.example/'))",
				Message:    "images from forbidden.example are not allowed",
				Reason:     &reason,
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := startProvider(t, ns, withEnv("SP_IMAGE_REGISTRIES="+harness.ImageRegistries+",forbidden.example"))
	p.waitSynced(t)
	var r response
	// The apiserver loads new policies asynchronously.
	testenv.Eventually(t, 30*time.Second, "policy enforced", func() error {
		r = do(t, http.MethodPost, p.URL+containers+"?id=img", spec("web", "forbidden.example/app:1"))
		if r.Status == 201 {
			do(t, http.MethodDelete, p.URL+containers+"/img", nil)
		}
		if r.Status != 400 {
			return fmt.Errorf("status %d", r.Status)
		}
		return nil
	})
	expectProblem(t, r, http.StatusBadRequest, "invalid-argument")
	if !strings.Contains(string(r.Body), "images from forbidden.example are not allowed") {
		t.Errorf("the cluster's reason is missing: %s", r.Body)
	}
	// An admission denial carries no field causes (the apiserver's own field errors do;
	// their mapping is unit-tested in internal/store), so it is reported against spec.
	if f := r.problemPointers(); len(f) != 1 || f[0] != "#/spec" {
		t.Errorf("pointers = %v, want [#/spec]: %s", f, r.Body)
	}
	expectNothing(t, ns)
}

// A provider whose identity may not act in its namespace says which permissions it
// lacks: a 503 naming them (never a bare "internal"), unhealthy health, an ERROR log.
func TestRBACDenialNamesTheMissingPermissions(t *testing.T) {
	ns := testenv.Namespace(t)
	var reviews atomic.Int32 // SelfSubjectAccessReviews the provider made
	p := startProvider(t, ns, func(_ *config.Config, rc *rest.Config) {
		rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return testenv.RoundTripFunc{RT: rt, F: func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/selfsubjectaccessreviews") {
					reviews.Add(1)
				}
				return rt.RoundTrip(r)
			}}
		})
	})
	r := do(t, http.MethodPost, p.URL+containers+"?id=denied", spec("web", "nginx"))
	expectProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	detail, _ := r.JSON["detail"].(string)
	if !strings.Contains(detail, "create configmaps") || !strings.Contains(detail, "deploy/base/role.yaml") ||
		strings.Contains(detail, "nobody") {
		t.Errorf("503 does not name the missing permission (or leaks the identity): %s", r.Body)
	}
	testenv.Eventually(t, 30*time.Second, "health says why", func() error {
		h := do(t, http.MethodGet, p.URL+"/health", nil)
		if msg, _ := h.JSON["message"].(string); h.JSON["status"] != "unhealthy" || !strings.Contains(msg, "list pods") {
			return fmt.Errorf("%s", h.Body)
		}
		return nil
	})
	// Refusals retried by a client reuse the last check's answer (explainEvery, 30 s):
	// no more access reviews, the same explanation. (The periodic check runs again only
	// a minute after the start-up one, which health has reported above.)
	before := reviews.Load()
	for i := range 5 {
		r := do(t, http.MethodPost, p.URL+containers+"?id=denied", spec("web", "nginx"))
		if d, _ := r.JSON["detail"].(string); !strings.Contains(d, "create configmaps") {
			t.Errorf("refusal %d does not name the missing permission: %s", i+2, r.Body)
		}
	}
	if n := reviews.Load() - before; n != 0 {
		t.Errorf("five more refusals made %d access reviews; want 0 (the last check's answer is reused)", n)
	}
	if logs := p.Logs(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "missing Kubernetes permissions") {
		t.Errorf("no ERROR log naming the missing permissions; logs:\n%s", logs)
	}
	expectNothing(t, ns)
}

// An apiserver that refuses connections, or accepts them and never answers: 503 with
// Retry-After, and health says unhealthy.
func TestKubernetesUnavailable(t *testing.T) {
	refusedAddr, err := proc.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	blackhole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blackhole.Close() })
	go func() {
		for {
			c, err := blackhole.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // hold it open, say nothing
		}
	}()
	for name, addr := range map[string]string{"refused": refusedAddr, "timeout": blackhole.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.Namespace(t)
			p := startProvider(t, ns, func(_ *config.Config, rc *rest.Config) {
				rc.Host = "https://" + addr
				rc.Timeout = time.Second
			})
			r := do(t, http.MethodPost, p.URL+containers+"?id=x", spec("web", "nginx"))
			expectProblem(t, r, http.StatusServiceUnavailable, "unavailable")
			if r.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			expectProblem(t, do(t, http.MethodGet, p.URL+containers+"/x", nil), http.StatusServiceUnavailable, "unavailable")
			expectProblem(t, do(t, http.MethodGet, p.URL+containers, nil), http.StatusServiceUnavailable, "unavailable")
			expectProblem(t, do(t, http.MethodDelete, p.URL+containers+"/x", nil), http.StatusServiceUnavailable, "unavailable")
			if h := do(t, http.MethodGet, p.URL+"/health", nil); h.Status != 200 || h.JSON["status"] != "unhealthy" {
				t.Errorf("health: %d %s", h.Status, h.Body)
			}
		})
	}
}
