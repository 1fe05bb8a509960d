package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// NATS goes down while a container changes state; when it is back, the new state
// arrives, and the stream holds it.
func TestStatusSurvivesNATSOutage(t *testing.T) {
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"))
	p.waitSynced(t)
	create(t, p, "keep", spec("keep", "nginx"))
	create(t, p, "gone", spec("gone", "nginx"))
	events.waitStatus("keep", "RUNNING", "", 30*time.Second)
	events.waitStatus("gone", "RUNNING", "", 30*time.Second)

	srv.Stop()
	// The API keeps serving while NATS is down.
	if r := do(t, http.MethodDelete, p.URL+containers+"/gone", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete during the outage: %d %s", r.Status, r.Body)
	}
	create(t, p, "new", spec("new", "nginx"))
	// The controller tries, fails, and keeps the latest state; the gauge says what is owed
	// (gone's DELETED and new's status) while the retries wait.
	testenv.Eventually(t, 30*time.Second, "failed deliveries, owed", func() error {
		if f, n := p.metric(t, "sp_status_events_failed_total"), p.metric(t, "sp_status_events_pending"); f == 0 || n != 2 {
			return fmt.Errorf("%v failed deliveries, %v pending, want some and 2", f, n)
		}
		return nil
	})
	// Health says NATS is down and what is owed, and stays healthy: the provider still
	// serves. The gauge says it too.
	h := do(t, http.MethodGet, p.URL+"/health", nil)
	if ev, _ := h.JSON["events"].(map[string]any); h.JSON["status"] != "healthy" || ev == nil || ev["connected"] != false || ev["undelivered"] != float64(2) {
		t.Errorf("health with NATS down: %s, want healthy, events connected false, 2 undelivered", h.Body)
	}
	if got := p.metric(t, "sp_nats_connected"); got != 0 {
		t.Errorf("sp_nats_connected with NATS down = %v, want 0", got)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	events.waitStatus("gone", "DELETED", "", 30*time.Second)
	events.waitStatus("new", "RUNNING", "", 30*time.Second)
	// The Deployment is gone (no finalizer holds a Deployment: the record carries the
	// owed DELETED).
	testenv.Eventually(t, 20*time.Second, "deleted Deployment gone", func() error {
		if d, _, _ := objectsOf(t, ns, "gone"); d > 0 {
			return fmt.Errorf("still there")
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "nothing owed", func() error {
		if n := p.metric(t, "sp_status_events_pending"); n != 0 {
			return fmt.Errorf("%v pending", n)
		}
		if h := do(t, http.MethodGet, p.URL+"/health", nil); h.JSON["events"].(map[string]any)["connected"] != true {
			return fmt.Errorf("health: %s", h.Body)
		}
		return nil
	})
	if got := p.metric(t, "sp_nats_connected"); got != 1 {
		t.Errorf("sp_nats_connected with NATS back = %v, want 1", got)
	}
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < 5 {
		t.Errorf("stream holds %d events after the outage", info.State.Msgs)
	}
}

// A restarted provider publishes every container's current status again, and a
// container deleted while it was down is reported DELETED when it is back.
func TestStatusAfterRestart(t *testing.T) {
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	first := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"))
	first.waitSynced(t)
	create(t, first, "stays", spec("stays", "nginx"))
	create(t, first, "dies", spec("dies", "nginx"))
	events.waitStatus("stays", "RUNNING", "", 30*time.Second)
	events.waitStatus("dies", "RUNNING", "", 30*time.Second)
	first.Stop()

	// Deleted with kubectl while no provider runs: the record remembers it. The new
	// provider never saw the container; its record is seconds old, which could also be
	// a create in progress, so DELETED comes once the record is twice the create timeout
	// old (here 2 × 5 s).
	deleteByHand(t, ns, "dies")
	stays := len(events.events("stays"))

	second := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100", "SP_K8S_CREATE_TIMEOUT=5s"))
	second.waitSynced(t)
	events.waitStatus("dies", "DELETED", "", 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "current status republished", func() error {
		if n := len(events.events("stays")); n == stays {
			return fmt.Errorf("no new event for a container that did not change")
		}
		return nil
	})
	if ev := events.last("stays"); ev.Data.Status != "RUNNING" {
		t.Errorf("republished %+v", ev.Data)
	}
}

// Two replicas: both serve the API, one publishes. When it stops, the other takes over
// within 20 s and republishes the current state.
func TestStatusTwoReplicasFailover(t *testing.T) {
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	a := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"))
	b := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"))
	a.waitSynced(t)
	b.waitSynced(t)
	var leader, follower *provider
	testenv.Eventually(t, 30*time.Second, "one leader", func() error {
		switch {
		case a.App.Leading() && !b.App.Leading():
			leader, follower = a, b
		case b.App.Leading() && !a.App.Leading():
			leader, follower = b, a
		default:
			return fmt.Errorf("leading: a=%v b=%v", a.App.Leading(), b.App.Leading())
		}
		if !leader.App.Controller().Active() {
			return fmt.Errorf("leader not reporting yet")
		}
		return nil
	})
	// Creates through both replicas; one event stream.
	create(t, a, "via-a", spec("via-a", "nginx"))
	create(t, b, "via-b", spec("via-b", "nginx"))
	events.waitStatus("via-a", "RUNNING", "", 30*time.Second)
	events.waitStatus("via-b", "RUNNING", "", 30*time.Second)
	leader.waitIdle(t)
	for _, id := range []string{"via-a", "via-b"} {
		// One publisher: each state is sent once (how many states a container passes
		// through on its way to RUNNING depends on timing: the pod may be seen
		// ContainerCreating or not).
		events.noRepeats(id)
		seen := map[string]bool{}
		for _, e := range events.events(id) {
			if seen[state(e.Data)] {
				t.Errorf("%s: %+v sent twice: %+v", id, e.Data, events.events(id))
			}
			seen[state(e.Data)] = true
		}
	}
	if r := do(t, http.MethodGet, follower.URL+containers+"/via-a", nil); r.Status != 200 {
		t.Errorf("the follower does not serve reads: %d", r.Status)
	}

	before := len(events.events("via-a"))
	stopped := time.Now()
	leader.Stop()
	testenv.Eventually(t, 20*time.Second, "the follower takes over", func() error {
		if !follower.App.Leading() {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	testenv.Eventually(t, 20*time.Second-time.Since(stopped), "current state republished by the new leader", func() error {
		if len(events.events("via-a")) == before {
			return fmt.Errorf("nothing yet")
		}
		return nil
	})
	t.Logf("failover and republish took %s", time.Since(stopped).Round(time.Millisecond))
	// And it reports new changes.
	if r := do(t, http.MethodDelete, follower.URL+containers+"/via-b", nil); r.Status != http.StatusNoContent {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	events.waitStatus("via-b", "DELETED", "", 30*time.Second)
}

// A graceful stop delivers what the debounce was still holding: once the stop has
// returned, the stream holds the container's latest status.
func TestStatusFlushedOnStop(t *testing.T) {
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	// A debounce far longer than any wait below: nothing but the stop's flush can send
	// the change before the stop, however slow the machine.
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=120000", "SP_MONITOR_DEBOUNCE_MAX_WAIT=240s"))
	// Let the start-up republish (of nothing) pass, or it would send the container.
	p.waitReporting(t)
	create(t, p, "late", spec("late", "nginx"))
	// The pod runs (kwok), the provider's own cache shows it (the controller plans what to
	// send from that cache when it sends: the apiserver may show the pod running while
	// the watch has not brought it yet), and the debounce holds the change.
	testenv.Eventually(t, 60*time.Second, "RUNNING in the provider's cache, its change held by the debounce", func() error {
		if st := p.App.Store().Snapshot("late").Status(); st.Status != v1alpha1.RUNNING {
			return fmt.Errorf("the cache shows %s", st.Status)
		}
		if p.App.Controller().Pending() == 0 {
			return fmt.Errorf("nothing held")
		}
		return nil
	})
	if evs := storedEvents(t, stream, "late"); len(evs) != 0 {
		t.Fatalf("%d events before the stop, with a 120 s debounce: %+v", len(evs), evs)
	}
	start := time.Now()
	p.Stop() // returns once the provider has stopped: the flush is done, or never will be
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stop took %s", d)
	}
	evs := storedEvents(t, stream, "late")
	if len(evs) == 0 || evs[len(evs)-1].Data.Status != string(v1alpha1.RUNNING) {
		t.Fatalf("after the stop the stream holds %+v for late, want RUNNING last", evs)
	}
}

// A Deployment with DCM's labels that no record owns (the reference provider's, or one
// made by hand) is not this provider's container: it is not read, never changed or
// deleted, no event is sent for it, and a create of its id makes a container of its
// own beside it, which selects only its own pods.
func TestForeignContainerIsLeftAlone(t *testing.T) {
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	one := int32(1)
	labels := map[string]string{container.LabelManagedBy: "dcm", container.LabelInstanceID: "legacy", container.LabelServiceType: "container"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-app", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "legacy", Image: "nginx:1",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					}}}},
			},
		},
	}
	made, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"))
	p.waitSynced(t)
	if r := do(t, http.MethodGet, p.URL+containers+"/legacy", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET of a Deployment no record owns: %d %s, want 404", r.Status, r.Body)
	}
	create(t, p, "legacy", spec("web", "nginx"))
	events.waitStatus("legacy", "RUNNING", "", 30*time.Second)
	if r := do(t, http.MethodDelete, p.URL+containers+"/legacy", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	events.waitStatus("legacy", "DELETED", "", 30*time.Second)
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "legacy-app", metav1.GetOptions{})
	if err != nil || d.UID != made.UID || d.DeletionTimestamp != nil || len(d.Finalizers)+len(d.OwnerReferences) > 0 {
		t.Errorf("the foreign Deployment was changed or deleted: %v", err)
	}
}
