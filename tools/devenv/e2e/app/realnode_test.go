package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Status on a real kubelet (containerd + runc), not kwok: containers created through our
// API in a namespace whose pods the scheduler puts on the real node, status read from
// NATS as DCM reads it. Skipped, with the reason, where a real node cannot run.

// onRealNode starts a provider whose namespace's pods run on the real node.
func onRealNode(t *testing.T, env ...string) (*provider, *sink, string) {
	t.Helper()
	_, ns := testenv.RealNodeNamespace(t)
	srv := testenv.NATS(t)
	events := newSink(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv(append([]string{"SP_MONITOR_DEBOUNCE_MS=100"}, env...)...))
	p.waitSynced(t)
	return p, events, ns
}

// small asks for a tenth of a core: the real node is this machine (2 CPUs), and the
// scheduler counts requests.
func small(s map[string]any) {
	s["resources"].(map[string]any)["cpu"] = map[string]any{"min": "100m", "max": "500m"}
}

// image is a small spec running one of the harness's test images.
func image(name, role string, edit ...func(map[string]any)) map[string]any {
	return spec(name, harness.TestImage(role), append([]func(map[string]any){small}, edit...)...)
}

func memory(min, max string) func(map[string]any) {
	return func(s map[string]any) {
		s["resources"].(map[string]any)["memory"] = map[string]any{"min": min, "max": max}
	}
}

// patchDeployment applies a strategic merge patch to a container's Deployment, as an
// operator would with kubectl.
func patchDeployment(t *testing.T, ns, id, patch string) {
	t.Helper()
	_, err := testenv.Cluster(t).Client.AppsV1().Deployments(ns).Patch(context.Background(), deploymentOf(t, ns, id).Name,
		types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// neverReported fails if id was ever reported with status.
func neverReported(t *testing.T, events *sink, id, status string) {
	t.Helper()
	for _, e := range events.events(id) {
		if e.Data.Status == status {
			t.Errorf("%s was reported %s: %+v", id, status, e.Data)
		}
	}
}

func TestRealNodeStatus(t *testing.T) {
	p, events, ns := onRealNode(t)
	create(t, p, "web", image("web", "web", withPorts(port(8080, "internal"))))
	create(t, p, "missing", spec("missing", harness.MissingImage, small)) // a public name nobody pushed
	create(t, p, "crash", image("crash", "crash"))
	create(t, p, "oom", image("oom", "oom", memory("64MB", "64MB")))
	create(t, p, "setuid", image("setuid", "setuid"))

	// Running with the pod IP.
	{
		events.waitStatus("web", "RUNNING", "Container is running.", 90*time.Second)
		r := do(t, http.MethodGet, p.URL+containers+"/web", nil)
		ip, _ := r.JSON["spec"].(map[string]any)["network"].(map[string]any)["ip"].(string)
		if r.JSON["status"] != "RUNNING" || !strings.HasPrefix(ip, "10.88.") {
			t.Errorf("GET: %s", r.Body)
		}
	}
	// A missing image is PENDING with the pull's reason and reference, never RUNNING; the
	// kubelet's text (it names the node's registry, 127.0.0.1:PORT, the address the pull
	// dialled) reaches neither the events nor GET: a tenant must not learn the node's
	// network from a pull (issue 34, finding 2).
	{
		e := events.waitStatus("missing", "PENDING", `could not pull image "`+harness.MissingImage+`"`, 90*time.Second)
		if !strings.HasPrefix(e.Data.Message, "ErrImagePull") && !strings.HasPrefix(e.Data.Message, "ImagePullBackOff") {
			t.Errorf("message %q", e.Data.Message)
		}
		registry := testenv.RealNode(t).Registry
		for _, ev := range events.events("missing") {
			if strings.Contains(ev.Data.Message, registry) || strings.Contains(ev.Data.Message, "127.0.0.1") {
				t.Errorf("an event shows the node's network: %q", ev.Data.Message)
			}
		}
		if r := do(t, http.MethodGet, p.URL+containers+"/missing", nil); strings.Contains(string(r.Body), registry) {
			t.Errorf("GET shows the node's network: %s", r.Body)
		}
		// The kubelet did say it: the detail exists, for the provider's log.
		pod := podOf(t, ns, "missing")
		if w := pod.Status.ContainerStatuses[0].State.Waiting; w == nil || !strings.Contains(w.Message, registry) {
			t.Logf("the kubelet's own message does not name the registry (now %+v)", w)
		}
		neverReported(t, events, "missing", "RUNNING")
	}
	// A crash loop is RUNNING with the back-off, restarts and last exit.
	{
		e := events.waitStatus("crash", "RUNNING", "(restarts: 2)", 120*time.Second)
		if !strings.Contains(e.Data.Message, "CrashLoopBackOff") || !strings.Contains(e.Data.Message, "last exit: Error, code 1") {
			t.Errorf("message %q", e.Data.Message)
		}
	}
	// An OOM kill shows in the message.
	{
		events.waitStatus("oom", "RUNNING", "OOMKilled, code 137", 120*time.Second)
	}
	// The default (baseline) profile runs a root image that chowns and setuids.
	{
		events.waitStatus("setuid", "RUNNING", "Container is running.", 90*time.Second)
		if pod := podOf(t, ns, "setuid"); pod.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("restarted: %+v", pod.Status.ContainerStatuses[0])
		}
	}
	// Not ready (a readiness probe added by hand) is RUNNING, saying so.
	{
		events.waitStatus("web", "RUNNING", "Container is running.", 90*time.Second)
		patchDeployment(t, ns, "web", `{"spec":{"template":{"spec":{"containers":[{"name":"web",`+
			`"readinessProbe":{"httpGet":{"path":"/healthz","port":9999},"periodSeconds":1}}]}}}}`)
		events.waitStatus("web", "RUNNING", "Container is running but not ready.", 90*time.Second)
	}
	// Delete stops the real pods at once: a crash-looping one and a running one.
	for _, id := range []string{"crash", "setuid"} {
		start := time.Now()
		if r := do(t, http.MethodDelete, p.URL+containers+"/"+id, nil); r.Status != http.StatusNoContent {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		// A real kubelet removes the pod object only once its containers are stopped.
		testenv.Eventually(t, 60*time.Second, "pod gone", func() error {
			if n := len(podsOf(t, ns, id)); n > 0 {
				return fmt.Errorf("%d pods left", n)
			}
			return nil
		})
		t.Logf("%s: DELETE to pod gone on the real kubelet: %s", id, time.Since(start).Round(10*time.Millisecond))
		events.waitStatus(id, "DELETED", "", 30*time.Second)
	}
}

// The restricted profile runs an image with a non-root user, refuses a root image, and
// the status says why.
func TestRealNodeRestrictedProfile(t *testing.T) {
	p, events, _ := onRealNode(t, "SP_K8S_POD_SECURITY=restricted")
	create(t, p, "root", image("root", "setuid"))
	create(t, p, "nonroot", spec("nonroot", harness.TestImageNonRoot("web"), small))
	events.waitStatus("nonroot", "RUNNING", "Container is running.", 90*time.Second)
	events.waitStatus("root", "PENDING", "runAsNonRoot", 90*time.Second)
	neverReported(t, events, "root", "RUNNING")
}

// The kubelet stops: the node goes NotReady and, after the node grace period, the
// container is UNKNOWN; the kubelet returns and it is RUNNING again.
func TestRealNodeKubeletStopped(t *testing.T) {
	node := testenv.RealNodeExclusive(t)
	p, events, _ := onRealNode(t)
	create(t, p, "lost", image("lost", "web"))
	events.waitStatus("lost", "RUNNING", "Container is running.", 90*time.Second)
	if err := node.StopKubelet(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = node.StartKubelet(context.Background())
		}
	})
	events.waitStatus("lost", "UNKNOWN", "NodeNotReady", 150*time.Second)
	if err := node.StartKubelet(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	events.waitStatus("lost", "RUNNING", "Container is running.", 120*time.Second)
}
