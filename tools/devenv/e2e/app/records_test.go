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
// and its garbage collector: deleting records (ConfigMaps) never deletes containers, DELETE removes
// the workload at once whatever NATS does, and a re-used id never mixes containers.

// uids are the UIDs of the Deployments and Services of ids, read from the apiserver.
func uids(t *testing.T, ns string, ids ...string) []types.UID {
	t.Helper()
	cs := testenv.Cluster(t).Client
	var out []types.UID
	for _, id := range ids {
		sel := metav1.ListOptions{LabelSelector: container.InstanceSelector(id)}
		deps, err := cs.AppsV1().Deployments(ns).List(context.Background(), sel)
		if err != nil {
			t.Fatal(err)
		}
		svcs, err := cs.CoreV1().Services(ns).List(context.Background(), sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps.Items {
			if d.DeletionTimestamp != nil {
				t.Errorf("Deployment %s of %s is being deleted", d.Name, id)
			}
			out = append(out, d.UID)
		}
		for _, s := range svcs.Items {
			out = append(out, s.UID)
		}
	}
	slices.Sort(out)
	return out
}

// waitRecords waits until every id has its record again.
func waitRecords(t *testing.T, ns string, ids ...string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "records restored", func() error {
		for _, id := range ids {
			l, err := testenv.Cluster(t).Client.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(id), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.DeletionTimestamp != nil {
				return fmt.Errorf("record of %s is being deleted", id)
			}
		}
		return nil
	})
}

func TestDeletingRecordsNeverDeletesContainers(t *testing.T) {
	ns, _, events, p := withStream(t)
	ids := []string{"rec-a", "rec-b", "rec-c"}
	for _, id := range ids {
		create(t, p, id, spec(id, "nginx", withPorts(port(80, "internal"))))
	}
	for _, id := range ids {
		events.waitStatus(id, "RUNNING", "", 30*time.Second)
	}
	before := uids(t, ns, ids...)
	cs := testenv.Cluster(t).Client
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		// kubectl delete configmap --all [--cascade=foreground]: the leader's lock goes too.
		err := cs.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(),
			metav1.DeleteOptions{PropagationPolicy: &policy}, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitRecords(t, ns, ids...)
		// The garbage collector has had every chance by now (it acts in milliseconds
		// here): the same objects, none being deleted.
		time.Sleep(2 * time.Second)
		if after := uids(t, ns, ids...); !slices.Equal(after, before) {
			t.Fatalf("%s cascade: Deployments and Services %v, were %v", policy, after, before)
		}
		for _, id := range ids {
			if r := do(t, http.MethodGet, p.URL+containers+"/"+id, nil); r.Status != http.StatusOK || r.JSON["status"] != "RUNNING" {
				t.Errorf("%s cascade: GET %s: %d %s", policy, id, r.Status, r.Body)
			}
			expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id="+id, spec(id, "nginx")), http.StatusConflict, "already-exists")
		}
	}
	for _, id := range ids {
		for _, e := range events.events(id) {
			if e.Data.Status != "RUNNING" && e.Data.Status != "PENDING" {
				t.Errorf("%s: event %s %q: DCM was told the container changed", id, e.Data.Status, e.Data.Message)
			}
		}
	}
	// The restored records are real ones: deleting a container still works and is reported.
	if r := do(t, http.MethodDelete, p.URL+containers+"/rec-a", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	events.waitStatus("rec-a", "DELETED", "", 30*time.Second)
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
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=quick", spec("quick", "nginx")), http.StatusConflict, "already-exists")
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
	// Kubernetes removes the Deployment and its pods on its own; the Service is the
	// provider's to remove (Kubernetes never ties a Service to a Deployment).
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
	expectProblem(t, do(t, http.MethodPost, p.URL+containers+"?id=again", spec("again", "nginx")), http.StatusConflict, "already-exists")
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
