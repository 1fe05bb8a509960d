package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/deploy"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// openShiftUID is a uid as OpenShift's restricted-v2 assigns from a namespace's range.
const openShiftUID = 1000680000

// The DCM loop through the deployed pod, running as a platform-assigned uid with gid 0:
// it registers with DCM's registry at its pod endpoint, a create through the registry
// reaches it and is RUNNING on the real node, a delete through the registry ends in
// DELETED.
func TestDeployedPodServesTheDCMLoop(t *testing.T) {
	srv := testenv.NATS(t)
	reg := testenv.Registry(t, srv.URL)
	ev := subscribe(t, srv.URL)
	in, ns := install(t, srv.URL, reg.URL, 1, deploy.Options{PostRenderer: deploy.AssignUID(openShiftUID)})
	if len(in.URLs) != 1 {
		t.Fatalf("pod URLs %v, want one", in.URLs)
	}
	pod := in.URLs[0]

	// The pod runs as the assigned uid, with group 0, nothing pinned by the chart.
	procs := serviceProcesses(t)
	var mine map[string]string
	for _, p := range procs {
		if strings.Fields(p["Uid"])[0] == strconv.Itoa(openShiftUID) {
			mine = p
		}
	}
	if mine == nil {
		t.Fatalf("no service process runs as uid %d: %v", openShiftUID, procs)
	}
	if gid := strings.Fields(mine["Gid"])[0]; gid != "0" {
		t.Errorf("the service runs with gid %s, want 0 (as OpenShift assigns)", gid)
	}
	t.Logf("service process %s: Uid %s, Gid %s, VmRSS %s at ready", mine["pid"], mine["Uid"], mine["Gid"], mine["VmRSS"])

	// Registered at its pod endpoint, and healthy in the registry's polls.
	testenv.Eventually(t, 60*time.Second, "registered and ready in DCM's registry", func() error {
		code, body := call(t, http.MethodGet, reg.URL+"/providers", nil)
		var list struct {
			Providers []map[string]any `json:"providers"`
		}
		if code != 200 || json.Unmarshal(body, &list) != nil {
			return fmt.Errorf("%d %s", code, body)
		}
		for _, p := range list.Providers {
			if p["name"] == "k8s-container-sp" && strings.HasPrefix(fmt.Sprint(p["endpoint"]), pod) && p["health_status"] == "ready" {
				return nil
			}
		}
		return fmt.Errorf("providers %s", body)
	})

	const id = "dcm-pod-1"
	code, body := call(t, http.MethodPost, reg.URL+"/service-type-instances?id="+id,
		map[string]any{"provider_name": "k8s-container-sp", "spec": spec("web")})
	if code != http.StatusCreated {
		t.Fatalf("create through the registry: %d %s", code, body)
	}
	ev.wait(t, id, "RUNNING", 90*time.Second)
	testenv.Eventually(t, 30*time.Second, "registry shows RUNNING", func() error {
		code, body := call(t, http.MethodGet, reg.URL+"/service-type-instances/"+id, nil)
		if code != 200 || !strings.Contains(string(body), `"RUNNING"`) {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if code, body := call(t, http.MethodDelete, reg.URL+"/service-type-instances/"+id, nil); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("delete through the registry: %d %s", code, body)
	}
	ev.wait(t, id, "DELETED", 60*time.Second)
	deps, err := testenv.Cluster(t).Client.AppsV1().Deployments(in.ContainersNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "dcm.project/dcm-instance-id=" + id})
	if err != nil || len(deps.Items) != 0 {
		t.Errorf("Deployments of %s after DELETED: %v, %v", id, deps, err)
	}
	// Tenants cannot join the provider: containers labelled as the provider's pods are
	// selected (dcm.project/provider) or were once (app.kubernetes.io/name and instance)
	// are refused with a 400; one with an unprefixed look-alike label runs, in the
	// containers' namespace, not the provider's, and the provider Service's endpoints stay
	// the provider's pod alone.
	tenant := spec("tenant")
	tenant["metadata"].(map[string]any)["labels"] = map[string]any{"app": "k8s-container-sp", "provider": "k8s-container-sp"}
	if code, body := call(t, http.MethodPost, pod+"/api/v1alpha1/containers?id=tenant", map[string]any{"spec": tenant}); code != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", code, body)
	}
	for _, labels := range []map[string]any{
		{"dcm.project/provider": "k8s-container-sp"},
		{"app.kubernetes.io/name": "k8s-container-sp", "app.kubernetes.io/instance": "k8s-container-sp"},
	} {
		sneaky := spec("sneaky")
		sneaky["metadata"].(map[string]any)["labels"] = labels
		if code, body := call(t, http.MethodPost, pod+"/api/v1alpha1/containers?id=sneaky", map[string]any{"spec": sneaky}); code != http.StatusBadRequest {
			t.Errorf("a container labelled %v: %d %s, want 400", labels, code, body)
		}
	}
	ev.wait(t, "tenant", "RUNNING", 90*time.Second)
	cs := testenv.Cluster(t).Client
	providerIP := strings.TrimSuffix(strings.TrimPrefix(pod, "http://"), ":8080")
	testenv.Eventually(t, 30*time.Second, "the provider Service's endpoints are its pod alone", func() error {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + in.Release})
		if err != nil {
			return err
		}
		var ips []string
		for _, sl := range slices.Items {
			for _, ep := range sl.Endpoints {
				ips = append(ips, ep.Addresses...)
			}
		}
		if len(ips) != 1 || ips[0] != providerIP {
			return fmt.Errorf("endpoints %v, want only the provider's pod %s", ips, providerIP)
		}
		return nil
	})
	for _, p := range serviceProcesses(t) {
		if p["pid"] == mine["pid"] {
			t.Logf("service process %s: VmRSS %s after the loop (VmHWM %s)", p["pid"], p["VmRSS"], p["VmHWM"])
		}
	}
}

// Two replicas: exactly one publishes; deleting the leader's pod moves publishing to
// another pod within the lease time, and a change made meanwhile is still delivered.
func TestDeployedTwoReplicasPublishOnceAndHandOver(t *testing.T) {
	srv := testenv.NATS(t)
	ev := subscribe(t, srv.URL)
	// The registry is not needed here: registration failing does not stop the service.
	in, ns := install(t, srv.URL, "http://127.0.0.1:1/api/v1alpha1", 2, deploy.Options{})
	if len(in.URLs) != 2 {
		t.Fatalf("pod URLs %v, want two", in.URLs)
	}
	leaderOf := func() (string, error) {
		var leaders []string
		for _, u := range in.URLs {
			code, body := call(t, http.MethodGet, u+"/metrics", nil)
			if code != 200 {
				continue // a pod that is gone
			}
			if strings.Contains(string(body), "\nsp_leader 1") {
				leaders = append(leaders, u)
			}
		}
		if len(leaders) != 1 {
			return "", fmt.Errorf("leaders %v of %v", leaders, in.URLs)
		}
		return leaders[0], nil
	}
	var leader string
	testenv.Eventually(t, 30*time.Second, "exactly one leader", func() (err error) {
		leader, err = leaderOf()
		return err
	})
	other := in.URLs[0]
	if other == leader {
		other = in.URLs[1]
	}
	if code, body := call(t, http.MethodPost, other+"/api/v1alpha1/containers?id=c1", map[string]any{"spec": spec("c1")}); code != http.StatusCreated {
		t.Fatalf("create c1: %d %s", code, body)
	}
	ev.wait(t, "c1", "RUNNING", 90*time.Second)
	time.Sleep(2 * time.Second) // a second publisher's copies would arrive by now
	ev.mu.Lock()
	for id, n := range ev.ids {
		if n > 1 {
			t.Errorf("event %s published %d times by two replicas", id, n)
		}
	}
	ev.mu.Unlock()

	// Delete the leader's pod, as an operator or a node drain would. It resigns at once;
	// whichever pod campaigns first takes over: the other one, or the ReplicaSet's
	// replacement.
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	leaderPod := lockHolder(t, in.ContainersNamespace)
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, leaderPod, metav1.GetOptions{}); err != nil || "http://"+p.Status.PodIP+":8080" != leader {
		t.Fatalf("the lock's holder %s is not the pod whose metrics say it leads (%s): %v", leaderPod, leader, err)
	}
	deleted := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, leaderPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Meanwhile c1 is deleted through the other pod: its DELETED must arrive.
	if code, body := call(t, http.MethodDelete, other+"/api/v1alpha1/containers/c1", nil); code != http.StatusNoContent {
		t.Fatalf("delete c1: %d %s", code, body)
	}
	var holder string
	testenv.Eventually(t, 30*time.Second, "another pod holds the lock", func() error {
		if holder = lockHolder(t, in.ContainersNamespace); holder == "" || holder == leaderPod {
			return fmt.Errorf("holder %q", holder)
		}
		return nil
	})
	took := time.Since(deleted)
	t.Logf("publishing moved from %s to %s %s after the leader's pod was deleted", leaderPod, holder, took.Round(100*time.Millisecond))
	if max := 14 * time.Second; took > max {
		t.Errorf("hand-over took %s, more than the lease time (%s)", took, max)
	}
	// The new leader publishes every container's current status again (the same event
	// ids): c1's DELETED is among what reaches NATS.
	ev.wait(t, "c1", "DELETED", 60*time.Second)
}

// lockHolder is the pod holding the publisher election's lock, a ConfigMap in the
// containers' namespace ns (the identity is the pod's name, as the chart sets
// SP_MONITOR_IDENTITY).
func lockHolder(t *testing.T, ns string) string {
	t.Helper()
	cm, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "k8s-container-sp-status", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	var rec struct {
		HolderIdentity string `json:"holderIdentity"`
	}
	_ = json.Unmarshal([]byte(cm.Annotations["control-plane.alpha.kubernetes.io/leader"]), &rec)
	return rec.HolderIdentity
}

// A Secret named in the values that does not exist: the pod does not start, and its
// start-up error (the kubelet's FailedMount event) names the Secret.
func TestMissingSecretIsNamed(t *testing.T) {
	in, ns := install(t, "nats://127.0.0.1:1", "http://127.0.0.1:1/api/v1alpha1", 1, deploy.Options{NoWait: true,
		Values: map[string]any{"apiToken": map[string]any{"secretName": "no-such-token", "key": "token"}}})
	if len(in.URLs) != 0 {
		t.Errorf("pods running without their Secret: %v", in.URLs)
	}
	cs := testenv.Cluster(t).Client
	testenv.Eventually(t, 60*time.Second, "an event naming the missing Secret", func() error {
		evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Pod" && e.Reason == "FailedMount" && strings.Contains(e.Message, `secret "no-such-token" not found`) {
				t.Logf("pod %s: %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Errorf("events %v", seen)
	})
}
