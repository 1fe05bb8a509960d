package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// The LimitRange and ResourceQuota deploy/base ships, applied to a containers'
// namespace of the real control plane: the seed's example is created and counted
// against the quota, and a pod made behind the service's back past the memory ratio is
// refused by the LimitRange.
func TestShippedLimitsAndQuota(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "..", "..", "deploy", "base", "containers-quota.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	var lr corev1.LimitRange
	var rq corev1.ResourceQuota
	if err := yaml.Unmarshal([]byte(docs[0]), &lr); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &rq); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().LimitRanges(ns).Create(ctx, &lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	p := startProvider(t, ns)
	p.waitSynced(t)
	seed := spec("web-app", "quay.io/myapp:v1.2", withPorts(port(8080, "external"), port(9090, "internal")), func(s map[string]any) {
		s["resources"] = map[string]any{"cpu": map[string]any{"min": 1, "max": 2}, "memory": map[string]any{"min": "1GB", "max": "2GB"}}
	})
	if r := do(t, http.MethodPost, p.URL+containers+"?id=seed", seed); r.Status != http.StatusCreated {
		t.Fatalf("the seed's example under the shipped quota: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 60*time.Second, "the quota counts the container's pod and Service", func() error {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, rq.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, lbs, mem := q.Status.Used[corev1.ResourcePods], q.Status.Used["services.loadbalancers"], q.Status.Used[corev1.ResourceRequestsMemory]
		if pods.Value() != 1 || lbs.Value() != 1 || mem.Cmp(resource.MustParse("1Gi")) != 0 {
			return fmt.Errorf("used %v", q.Status.Used)
		}
		return nil
	})

	// Behind the service's back: 16Mi requested, 64Gi allowed.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "overcommit"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "quay.io/x:v1", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Gi")},
		}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "memory max limit to request ratio") {
		t.Errorf("a pod past the memory ratio: %v, want the LimitRange's refusal", err)
	}
}
