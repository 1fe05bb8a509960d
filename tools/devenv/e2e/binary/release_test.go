package binary_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

func post(t *testing.T, url, id string, withPort bool) {
	t.Helper()
	spec := map[string]any{
		"service_type": "container",
		"metadata":     map[string]any{"name": id},
		"image":        map[string]any{"reference": "nginx:1"},
		"resources":    map[string]any{"cpu": map[string]any{"min": 1, "max": 1}, "memory": map[string]any{"min": "64MB", "max": "64MB"}},
	}
	if withPort {
		spec["network"] = map[string]any{"ports": []any{map[string]any{"container_port": 80, "visibility": "internal"}}}
	}
	body, _ := json.Marshal(map[string]any{"spec": spec})
	resp, err := http.Post(url+"/api/v1alpha1/containers?id="+id, "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s: %v %v", id, resp, err)
	}
	resp.Body.Close()
}

// runRelease runs `k8s-container-sp release` with the service's settings.
func runRelease(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"release"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// An operator uninstalls the provider: release leaves every workload running and
// nothing of the provider's behind, and refuses while a replica still runs.
func TestReleaseLeavesWorkloadsRunning(t *testing.T) {
	env := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	cs := env.Client
	ctx := context.Background()
	settings := []string{"SP_NAME=k8s-container-sp", "SP_ENDPOINT=http://127.0.0.1:8080",
		"DCM_REGISTRATION_URL=http://127.0.0.1:1/api/v1alpha1", "SP_NATS_URL=" + srv.URL,
		"SP_K8S_NAMESPACE=" + ns, "SP_K8S_KUBECONFIG=" + env.Kubeconfig, "SP_MONITOR_DEBOUNCE_MS=100"}
	p := start(t, settings)
	post(t, p.url, "keep-a", true)
	post(t, p.url, "keep-b", false)
	post(t, p.url, "gone", false)
	// "gone" is deleted while NATS is down: its record still owes DCM the DELETED.
	srv.Stop()
	req, _ := http.NewRequest(http.MethodDelete, p.url+"/api/v1alpha1/containers/gone", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %v %v", resp, err)
	}
	testenv.Eventually(t, 20*time.Second, "a leader", func() error {
		if lockHolder(cs, ns) == "" {
			return fmt.Errorf("none yet")
		}
		return nil
	})

	if code, out := runRelease(t, settings); code != 1 || !strings.Contains(out, "still runs") {
		t.Fatalf("release while running: exit %d: %s", code, out)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()

	code, out := runRelease(t, settings)
	if code != 0 || !strings.Contains(out, "3 container records deleted") || !strings.Contains(out, "owed to DCM for (now never sent by this provider): gone") {
		t.Fatalf("release: exit %d: %s", code, out)
	}
	t.Logf("release said: %s", out)
	if code, out := runRelease(t, settings); code != 0 || !strings.Contains(out, "0 container records deleted") {
		t.Errorf("release again: exit %d: %s", code, out)
	}

	// Nothing of the provider's left: no record, no lock.
	records, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: container.Selector})
	if err != nil || len(records.Items) != 0 {
		t.Fatalf("records left: %v %v", records, err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "k8s-container-sp-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the lock ConfigMap left: %v", err)
	}
	// The garbage collector has had its chance: every workload is still there, owned by nothing.
	time.Sleep(2 * time.Second)
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(deps.Items) != 2 {
		t.Fatalf("Deployments after release: %d %v, want keep-a and keep-b", len(deps.Items), err)
	}
	for _, d := range deps.Items {
		if d.DeletionTimestamp != nil || len(d.Finalizers)+len(d.OwnerReferences) > 0 {
			t.Errorf("Deployment %s: deleting %v, finalizers %v, owners %v", d.Name, d.DeletionTimestamp, d.Finalizers, d.OwnerReferences)
		}
	}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(svcs.Items) != 1 {
		t.Fatalf("Services after release: %d %v, want keep-a's", len(svcs.Items), err)
	}
	for _, s := range svcs.Items {
		if len(s.OwnerReferences) > 0 {
			t.Errorf("Service %s still owned by %v", s.Name, s.OwnerReferences)
		}
	}
	// Nothing is stuck: deleting what is left (as the next owner might) just works.
	for _, d := range deps.Items {
		if err := cs.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "Deployments deleted", func() error {
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(deps.Items) > 0 {
			err = fmt.Errorf("%d left", len(deps.Items))
		}
		return err
	})
}
