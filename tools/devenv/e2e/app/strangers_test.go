package app_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// A stranger's container on a real kubelet, with the defaults (issue 34, item 4):
// baseline drops NET_RAW (a raw socket is refused) and still runs a root image that
// chowns and setuids; every container is pulled with Always (from the node's registry,
// which works) and gets an ephemeral-storage request and limit; one that writes more
// than its limit is evicted by the kubelet, not its neighbours.
func TestRealNodeStrangersPods(t *testing.T) {
	p, events, ns := onRealNode(t, "SP_K8S_EPHEMERAL_STORAGE_LIMIT=16Mi", "SP_K8S_EPHEMERAL_STORAGE_REQUEST=8Mi")
	create(t, p, "netraw", image("netraw", "netraw"))
	create(t, p, "setuid", image("setuid", "setuid"))
	create(t, p, "fill", image("fill", "fill", func(s map[string]any) {
		s["process"] = map[string]any{"env": []any{map[string]any{"name": "FILL_MIB", "value": "48"}}}
	}))

	// Without NET_RAW the raw socket is refused and the container runs; with it, it
	// would exit 42 and crash-loop.
	events.waitStatus("netraw", "RUNNING", "Container is running.", 90*time.Second)
	events.waitStatus("setuid", "RUNNING", "Container is running.", 90*time.Second)
	time.Sleep(3 * time.Second) // a crash would show as a restart by now
	for _, id := range []string{"netraw", "setuid"} {
		pod := podOf(t, ns, id)
		c := pod.Spec.Containers[0]
		if cs := pod.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.LastTerminationState.Terminated != nil {
			t.Errorf("%s restarted: %+v", id, cs)
		}
		if c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("%s: imagePullPolicy %q", id, c.ImagePullPolicy)
		}
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Drop) != 1 ||
			c.SecurityContext.Capabilities.Drop[0] != "NET_RAW" {
			t.Errorf("%s: capabilities %+v", id, c.SecurityContext)
		}
		if l := c.Resources.Limits[corev1.ResourceEphemeralStorage]; l.String() != "16Mi" {
			t.Errorf("%s: ephemeral-storage limit %s", id, l.String())
		}
	}

	// 48 MiB written past a 16 MiB limit: the kubelet's eviction manager (every 10 s)
	// evicts that pod. (Kubelet 1.37 here then shows the pod Succeeded, without the
	// Evicted reason, because the test image exits 0 on SIGTERM; its log says why.)
	node := testenv.RealNode(t)
	testenv.Eventually(t, 120*time.Second, "fill evicted", func() error {
		log, err := os.ReadFile(filepath.Join(node.Dir, "kubelet.log"))
		if err != nil {
			return err
		}
		for _, pod := range podsOf(t, ns, "fill") {
			if pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending &&
				strings.Contains(string(log), `"Eviction manager: pod is evicted successfully" pod="`+ns+"/"+pod.Name+`"`) {
				t.Logf("evicted: %s (%s %s %s)", pod.Name, pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
				return nil
			}
		}
		return errors.New("no pod of fill evicted yet")
	})
	// Its neighbours run on.
	for _, id := range []string{"netraw", "setuid"} {
		if pod := podOf(t, ns, id); pod.Status.Phase != corev1.PodRunning {
			t.Errorf("%s: %s after the eviction", id, pod.Status.Phase)
		}
	}
}

// What the tenant policy refuses is a 400 naming the field and the rule, and leaves
// nothing in the cluster: no record, no Deployment, no Service (the defaults).
func TestPolicyRefusalsLeaveNothing(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns, withEnv("SP_IMAGE_REGISTRIES=docker.io,quay.io", "SP_K8S_MIXED_VISIBILITY=refuse"))
	p.waitSynced(t)
	cases := []struct {
		id, pointer, says string
		body              map[string]any
	}{
		{"scan", "#/spec/image/reference", "is an IP address", spec("web", "10.96.0.1:443/x")},
		{"svc", "#/spec/image/reference", "cluster-internal name", spec("web", "nats.dcm.svc:4222/x")},
		{"unlisted", "#/spec/image/reference", "SP_IMAGE_REGISTRIES: docker.io, quay.io", spec("web", "ghcr.io/x:v1")},
		{"mesh", "#/spec/metadata/labels/sidecar.istio.io~1inject", "reserved", spec("web", "nginx", func(s map[string]any) {
			s["metadata"].(map[string]any)["labels"] = map[string]any{"sidecar.istio.io/inject": "true"}
		})},
		{"endpoint", "#/spec/metadata/labels/app.kubernetes.io~1name", "reserved", spec("web", "nginx", func(s map[string]any) {
			s["metadata"].(map[string]any)["labels"] = map[string]any{"app.kubernetes.io/name": "k8s-container-sp"}
		})},
		{"cilium", "#/spec/metadata/labels/io.cilium.k8s.policy.serviceaccount", "reserved", spec("web", "nginx", func(s map[string]any) {
			s["metadata"].(map[string]any)["labels"] = map[string]any{"io.cilium.k8s.policy.serviceaccount": "default"}
		})},
		{"mixed", "#/spec/network/ports/1/visibility", "SP_K8S_MIXED_VISIBILITY=refuse",
			spec("web", "nginx", withPorts(port(8080, "external"), port(9090, "internal")))},
		{"huge", "#/spec/resources/memory/max", "SP_MAX_MEMORY", spec("web", "nginx", memory("1GB", "4096TB"))},
		{"overcommit", "#/spec/resources/memory/max", "SP_MAX_MEMORY_RATIO", spec("web", "nginx", memory("16MB", "64GB"))},
		{"ports", "#/spec/network/ports", "SP_MAX_EXTERNAL_PORTS", spec("web", "nginx", withPorts(port(1, "external"),
			port(2, "external"), port(3, "external"), port(4, "external"), port(5, "external")))},
	}
	for _, tc := range cases {
		r := do(t, http.MethodPost, p.URL+containers+"?id="+tc.id, tc.body)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), tc.says) || !strings.Contains(string(r.Body), tc.pointer) {
			t.Errorf("%s: %d %s, want a 400 at %s saying %q", tc.id, r.Status, r.Body, tc.pointer, tc.says)
		}
	}
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	deps, err1 := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	svcs, err2 := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	cms, err3 := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: container.LabelManagedBy})
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items)+len(svcs.Items)+len(cms.Items) > 0 {
		t.Errorf("refused creates left %d Deployments, %d Services, %d records", len(deps.Items), len(svcs.Items), len(cms.Items))
	}
}
