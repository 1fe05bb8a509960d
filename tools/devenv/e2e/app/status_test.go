package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// natsWithStream starts NATS with the registry's stream (dcm-status on dcm.*), so
// publishes are acknowledged by JetStream, and returns it with a client for the stream.
func natsWithStream(t *testing.T) (*harness.NATS, jetstream.Stream) {
	t.Helper()
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "dcm-status", Subjects: []string{"dcm.*"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return srv, st
}

func podOf(t *testing.T, ns, id string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testenv.Eventually(t, 20*time.Second, "pod of "+id, func() error {
		pods, err := testenv.Cluster(t).Client.CoreV1().Pods(ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: container.InstanceSelector(id)})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no pod")
		}
		pod = &pods.Items[0]
		return nil
	})
	return pod
}

func create(t *testing.T, p *provider, id string, body map[string]any) {
	t.Helper()
	if r := do(t, http.MethodPost, p.URL+containers+"?id="+id, body); r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", id, r.Status, r.Body)
	}
}

// Every row of the status mapping, as DCM receives it: CloudEvents on dcm.container,
// acknowledged by a JetStream stream like the registry's.
func TestStatusEvents(t *testing.T) {
	ns := testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events := newStreamSink(t, stream)
	// No cpu cap: "huge" asks more than any node has, to be unschedulable.
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100", "SP_MAX_CPU=0"))
	p.waitReporting(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()

	create(t, p, "run", spec("run", "quay.io/example/web:v1"))
	create(t, p, "pull", spec("pull", harness.FateImagePullBackOff+":v1"))
	create(t, p, "crash", spec("crash", harness.FateCrashLoopBackOff+":v1"))
	create(t, p, "oom", spec("oom", harness.FateOOMKilled+":v1"))
	create(t, p, "huge", spec("huge", "nginx", func(s map[string]any) {
		s["resources"].(map[string]any)["cpu"] = map[string]any{"min": 5000, "max": 5000}
	}))
	create(t, p, "lost", spec("lost", "nginx"))
	create(t, p, "phase", spec("phase", "nginx"))
	create(t, p, "apidel", spec("apidel", "nginx"))
	create(t, p, "kubedel", spec("kubedel", "nginx", withPorts(port(80, "internal"))))

	ev := events.waitStatus("run", "RUNNING", "Container is running.", 30*time.Second)
	if ev.SpecVersion != "1.0" || ev.Source != "dcm/providers/k8s-container-sp" || ev.Type != "dcm.status.container" ||
		ev.Subject != "dcm.container" || ev.DataContentType != "application/json" || ev.ID == "" || ev.Time == "" {
		t.Errorf("CloudEvent attributes: %+v", ev)
	}
	if g := do(t, http.MethodGet, p.URL+containers+"/run", nil); g.JSON["spec"].(map[string]any)["network"].(map[string]any)["ip"] == nil {
		t.Errorf("RUNNING without a Pod IP on GET: %s", g.Body)
	}
	events.waitStatus("pull", "PENDING", "ImagePullBackOff", 30*time.Second)
	events.waitStatus("crash", "RUNNING", "CrashLoopBackOff", 30*time.Second)
	events.waitStatus("crash", "RUNNING", "restarts: 5", time.Second)
	events.waitStatus("oom", "RUNNING", "last exit: OOMKilled, code 137", 30*time.Second)
	events.waitStatus("huge", "PENDING", "Insufficient cpu", 30*time.Second)
	events.waitStatus("huge", "PENDING", "Unschedulable", time.Second)

	events.waitStatus("lost", "RUNNING", "", 30*time.Second)
	pod := podOf(t, ns, "lost")
	if err := harness.MarkPodLost(ctx, cs, ns, pod.Name); err != nil {
		t.Fatal(err)
	}
	events.waitStatus("lost", "UNKNOWN", "NodeNotReady", 30*time.Second)

	// A pod whose phase turns Unknown (what a kubelet that cannot tell reports).
	events.waitStatus("phase", "RUNNING", "", 30*time.Second)
	pod = podOf(t, ns, "phase")
	pod.Status.Phase, pod.Status.Reason, pod.Status.Message = corev1.PodUnknown, "Probe", "cannot tell"
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	events.waitStatus("phase", "UNKNOWN", "Probe: cannot tell", 30*time.Second)

	events.waitStatus("apidel", "RUNNING", "", 30*time.Second)
	if r := do(t, http.MethodDelete, p.URL+containers+"/apidel", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	events.waitStatus("apidel", "DELETED", "", 30*time.Second)

	// Deleted behind the provider's back: the container's record remembers that
	// DELETED is owed until it is delivered.
	events.waitStatus("kubedel", "RUNNING", "", 30*time.Second)
	deleteByHand(t, ns, "kubedel")
	events.waitStatus("kubedel", "DELETED", "", 30*time.Second)
	// Once DELETED is delivered the records are deleted, and the Service the
	// hand-deleted container left is removed.
	testenv.Eventually(t, 20*time.Second, "deleted containers' records and Services gone", func() error {
		if d, s, l := objectsOf(t, ns, "kubedel", "apidel"); d+s+l > 0 {
			return fmt.Errorf("%d Deployments, %d Services, %d reservations left", d, s, l)
		}
		return nil
	})

	for _, id := range []string{"run", "pull", "crash", "huge", "lost", "phase", "apidel", "kubedel"} {
		events.noRepeats(id)
	}
	// The stream acknowledged and kept the events.
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < 10 {
		t.Errorf("stream holds %d events", info.State.Msgs)
	}
}

// A ResourceQuota that refuses the pod: the Deployment reports ReplicaFailure -> FAILED.
func TestStatusReplicaFailureFromQuota(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := testenv.NATS(t)
	events := newSink(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=100"))
	p.waitSynced(t)
	create(t, p, "quota", spec("quota", "nginx"))
	// The quota's words (the namespace's usage, every tenant's) are withheld.
	e := events.waitStatus("quota", "FAILED", "FailedCreate: the namespace's resource quota does not admit the container's pod", 60*time.Second)
	if strings.Contains(e.Data.Message, "exceeded quota") || strings.Contains(e.Data.Message, "no-pods") {
		t.Errorf("message %q quotes the quota", e.Data.Message)
	}
}

// Rapid oscillation inside the debounce window collapses to nothing new; a container
// that keeps flapping is still reported within the maximum wait.
func TestStatusDebounce(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	events := newSink(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("SP_MONITOR_DEBOUNCE_MS=400", "SP_MONITOR_DEBOUNCE_MAX_WAIT=1s"))
	p.waitSynced(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	create(t, p, "flap", spec("flap", "nginx"))
	events.waitStatus("flap", "RUNNING", "Container is running.", 30*time.Second)
	p.waitIdle(t)
	before := len(events.events("flap"))

	setStatus := func(phase corev1.PodPhase, reason string) {
		t.Helper()
		pod := podOf(t, ns, "flap")
		pod.Status.Phase, pod.Status.Reason = phase, reason
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// running -> unknown -> running within milliseconds: nothing to report.
	setStatus(corev1.PodUnknown, "NodeLost")
	setStatus(corev1.PodRunning, "")
	// The blip reaches the debounce, which then lets it go (after 400 ms) as nothing.
	testenv.Eventually(t, 10*time.Second, "the blip seen", func() error {
		if p.App.Controller().Pending() == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	p.waitIdle(t)
	if n := len(events.events("flap")) - before; n != 0 {
		t.Errorf("a blip inside the debounce window produced %d events: %+v", n, events.events("flap")[before:])
	}

	// Flapping every 50 ms for 3 s never settles for 400 ms: the maximum wait must
	// still report it while it flaps (both states are UNKNOWN, so whatever the report
	// reads differs from the RUNNING sent before).
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		setStatus(corev1.PodUnknown, "NodeLost")
		time.Sleep(25 * time.Millisecond)
		setStatus(corev1.PodUnknown, "NodeUnreachable")
		time.Sleep(25 * time.Millisecond)
	}
	if len(events.events("flap")) == before {
		t.Errorf("no event during 3 s of flapping with max-wait 1 s")
	}
	setStatus(corev1.PodUnknown, "NodeGone")
	events.waitStatus("flap", "UNKNOWN", "NodeGone", 5*time.Second)
	events.noRepeats("flap")
}

// withStream starts NATS with the registry's stream, a sink on it and a provider
// publishing there (debounce 100 ms, extra settings in env), synced.
func withStream(t *testing.T, env ...string) (ns string, srv *harness.NATS, events *sink, p *provider) {
	t.Helper()
	ns = testenv.Namespace(t)
	srv, stream := natsWithStream(t)
	events = newStreamSink(t, stream)
	p = startProvider(t, ns, withNATS(srv.URL), withEnv(append([]string{"SP_MONITOR_DEBOUNCE_MS=100"}, env...)...))
	p.waitSynced(t)
	return ns, srv, events, p
}
