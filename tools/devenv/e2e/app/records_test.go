package app_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// The container record (internal/container/record.go) against the real control plane
// and its garbage collector: the record owns its container, so deleting it (however)
// deletes the container and DCM is told; DELETE removes the workload at once whatever
// NATS does; a re-used id never mixes containers.

// A record deleted by hand (kubectl delete configmap, any cascade) is a container
// deleted: the garbage collector deletes what it owns, DCM gets the DELETED, the record
// goes once it is delivered, and the ids are free again. The leader's lock, deleted
// with them, is made again.
func TestDeletingARecordDeletesItsContainer(t *testing.T) {
	ns, _, events, p := withStream(t)
	ids := []string{"rec-a", "rec-b"}
	for _, id := range ids {
		create(t, p, id, spec(id, "nginx", withPorts(port(80, "internal"))))
	}
	for _, id := range ids {
		events.waitStatus(id, "RUNNING", "", 30*time.Second)
	}
	cs := testenv.Cluster(t).Client
	// kubectl delete configmap --all: the leader's lock goes too.
	bg := metav1.DeletePropagationBackground
	if err := cs.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(),
		metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		events.waitStatus(id, "DELETED", "", 30*time.Second)
		if r := do(t, http.MethodGet, p.URL+containers+"/"+id, nil); r.Status != http.StatusNotFound {
			t.Errorf("GET %s after its record was deleted: %d %s", id, r.Status, r.Body)
		}
	}
	expectNothing(t, ns)
	for _, id := range ids {
		create(t, p, id, spec(id, "nginx"))
		events.waitStatus(id, "RUNNING", "", 30*time.Second)
	}
}

// podsOf lists the pods of a container id, terminating ones included.
func podsOf(t *testing.T, ns, id string) []corev1.Pod {
	t.Helper()
	pods, err := testenv.Cluster(t).Client.CoreV1().Pods(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: container.InstanceSelector(id)})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// workloadGone waits (a few seconds) until no Deployment, Service or pod of id is left.
func workloadGone(t *testing.T, ns, id string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "workload of "+id+" gone", func() error {
		d, s, _ := objectsOf(t, ns, id)
		if n := len(podsOf(t, ns, id)); d+s+n > 0 {
			return fmt.Errorf("%d Deployments, %d Services, %d pods", d, s, n)
		}
		return nil
	})
}

func TestDeleteRemovesTheWorkloadAtOnceWhileNATSIsDown(t *testing.T) {
	ns, srv, events, p := withStream(t)
	create(t, p, "quick", spec("quick", "nginx", withPorts(port(80, "internal"))))
	events.waitStatus("quick", "RUNNING", "", 30*time.Second)

	srv.Stop()
	start := time.Now()
	if r := do(t, http.MethodDelete, p.URL+containers+"/quick", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	answered := time.Since(start)
	workloadGone(t, ns, "quick")
	t.Logf("NATS down: DELETE answered in %s, Deployment, Service and pod gone %s after it",
		answered.Round(time.Millisecond), (time.Since(start) - answered).Round(10*time.Millisecond))
	if r := do(t, http.MethodGet, p.URL+containers+"/quick", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET after delete: %d", r.Status)
	}
	// The record remembers the DELETED owed (finalizer on) and keeps the id: re-using
	// it now would let the new container's events race the old one's DELETED.
	l, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName("quick"), metav1.GetOptions{})
	if err != nil || !slices.Contains(l.Finalizers, container.RecordFinalizer) {
		t.Fatalf("record while DELETED is owed: %v %v", l, err)
	}
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=quick", spec("quick", "nginx")), http.StatusConflict, "being-deleted")
	// Someone clears ConfigMaps meanwhile: the owed record stays.
	if err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), container.RecordName("quick"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A restart during the outage: the record is all that remembers.
	p.Stop()
	p = startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"))
	p.waitSynced(t)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	events.waitStatus("quick", "DELETED", "", 30*time.Second)
	expectNothing(t, ns)
	create(t, p, "quick", spec("quick", "nginx"))
	events.waitStatus("quick", "RUNNING", "", 30*time.Second)
	// One DELETED, between the two containers' events.
	var statuses []string
	for _, e := range events.events("quick") {
		statuses = append(statuses, e.Data.Status)
	}
	if i := slices.Index(statuses, "DELETED"); i < 1 || slices.Contains(statuses[i+1:], "DELETED") || statuses[len(statuses)-1] != "RUNNING" {
		t.Errorf("events of quick: %v", statuses)
	}
}

func TestDeploymentDeletedWhileStoppedIsReported(t *testing.T) {
	ns, srv, events, p := withStream(t)
	create(t, p, "bykubectl", spec("bykubectl", "nginx", withPorts(port(80, "internal"))))
	events.waitStatus("bykubectl", "RUNNING", "", 30*time.Second)
	p.Stop()

	deleteByHand(t, ns, "bykubectl")
	// Kubernetes removes the Deployment and its pods on its own; the Service goes with
	// the record, which the provider deletes once it sees the Deployment gone.
	testenv.Eventually(t, 10*time.Second, "Deployment and pods gone", func() error {
		d, _, _ := objectsOf(t, ns, "bykubectl")
		if n := len(podsOf(t, ns, "bykubectl")); d+n > 0 {
			return fmt.Errorf("%d Deployments, %d pods", d, n)
		}
		return nil
	})
	// The new provider never saw this seconds-old container: its record could be a
	// create in progress until it is twice the create timeout old (here 2 × 5 s).
	p = startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100", "SP_K8S_CREATE_TIMEOUT=5s"))
	p.waitSynced(t)
	events.waitStatus("bykubectl", "DELETED", "", 30*time.Second)
	expectNothing(t, ns)
	events.noRepeats("bykubectl")
}

// The same id used again while the earlier container's pod is still terminating: the
// new Service and the new GET select only the new container's pod.
func TestReusedIDNeverMixesContainers(t *testing.T) {
	ns, srv, events, p := withStream(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	create(t, p, "again", spec("again", "nginx", withPorts(port(80, "internal"))))
	events.waitStatus("again", "RUNNING", "", 30*time.Second)
	old := podOf(t, ns, "again")
	// Hold the old pod in Terminating, as a slow-stopping process on a real node would.
	hold := `{"metadata":{"finalizers":["test.dcm.project/hold"]}}`
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, old.Name, types.MergePatchType, []byte(hold), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cs.CoreV1().Pods(ns).Patch(ctx, old.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	srv.Stop()
	if r := do(t, http.MethodDelete, p.URL+containers+"/again", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	// DELETED not delivered yet: the id is still the old container's.
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=again", spec("again", "nginx")), http.StatusConflict, "being-deleted")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	events.waitStatus("again", "DELETED", "", 30*time.Second)
	testenv.Eventually(t, 20*time.Second, "id free again", func() error {
		r := do(t, http.MethodPost, p.URL+containers+"?id=again", spec("again", "nginx", withPorts(port(80, "internal"))))
		if r.Status != http.StatusCreated {
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		return nil
	})
	events.waitStatus("again", "RUNNING", "", 30*time.Second)

	var fresh *corev1.Pod
	for _, pod := range podsOf(t, ns, "again") {
		if pod.Name == old.Name {
			if pod.DeletionTimestamp == nil {
				t.Fatalf("old pod %s not terminating", pod.Name)
			}
			continue
		}
		fresh = &pod
	}
	if fresh == nil || fresh.Status.PodIP == "" || fresh.Status.PodIP == old.Status.PodIP {
		t.Fatalf("new pod %+v (old pod IP %s)", fresh, old.Status.PodIP)
	}
	inc := fresh.Labels[container.LabelIncarnation]
	if inc == "" || inc == old.Labels[container.LabelIncarnation] {
		t.Fatalf("incarnations: new %q, old %q", inc, old.Labels[container.LabelIncarnation])
	}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: container.InstanceSelector("again")})
	if err != nil || len(svcs.Items) != 1 || svcs.Items[0].Spec.Selector[container.LabelIncarnation] != inc {
		t.Fatalf("Service of the new container: %+v %v", svcs, err)
	}
	r := do(t, http.MethodGet, p.URL+containers+"/again", nil)
	ip, _ := r.JSON["spec"].(map[string]any)["network"].(map[string]any)["ip"].(string)
	if r.Status != http.StatusOK || ip != fresh.Status.PodIP {
		t.Errorf("GET: %d, ip %q, want the new pod's %s (old %s)", r.Status, ip, fresh.Status.PodIP, old.Status.PodIP)
	}
}
