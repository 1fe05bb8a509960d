package harness_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func deployment(name, image string) *appsv1.Deployment {
	one := int32(1)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
}

// A Deployment made with client-go gets a ReplicaSet and a Pod, and an informer sees the
// Pod Running with a Pod IP: the controller-manager, scheduler and kwok all work.
func TestDeploymentPodRunsWithIP(t *testing.T) {
	e := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	factory := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	running := make(chan *corev1.Pod, 1)
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p := obj.(*corev1.Pod); p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				select {
				case running <- p:
				default:
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop only when ctx is cancelled.
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, deployment("web", "quay.io/example/web:v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-running:
		if p.Spec.NodeName != harness.NodeName {
			t.Errorf("pod scheduled to %q, want %q", p.Spec.NodeName, harness.NodeName)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" {
			t.Errorf("pod owners = %+v, want one ReplicaSet", p.OwnerReferences)
		}
		t.Logf("pod %s Running with IP %s", p.Name, p.Status.PodIP)
	case <-ctx.Done():
		t.Fatal("no Running pod with an IP within 60s")
	}
	rs, err := e.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(rs.Items) != 1 {
		t.Fatalf("ReplicaSets = %v, %v; want one", rs, err)
	}
}

// Each fate image drives the pod to the status a real kubelet would report.
func TestFateMarkers(t *testing.T) {
	e := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	cases := []struct {
		name, image string
		check       func(*corev1.Pod) error
	}{
		{"image-pull-backoff", harness.FateImagePullBackOff + ":v1", func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodPending {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			return waiting(p, "ImagePullBackOff")
		}},
		{"crash-loop-backoff", harness.FateCrashLoopBackOff, func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			if err := waiting(p, "CrashLoopBackOff"); err != nil {
				return err
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount == 0 || cs.LastTerminationState.Terminated == nil {
				return fmt.Errorf("restarts %d, last state %+v", cs.RestartCount, cs.LastTerminationState)
			}
			return nil
		}},
		{"oom-killed", harness.FateOOMKilled + "@sha256:" + fmt.Sprintf("%064d", 0), func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			if err := waiting(p, "CrashLoopBackOff"); err != nil {
				return err
			}
			if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.Reason != "OOMKilled" || last.ExitCode != 137 {
				return fmt.Errorf("last state %+v", p.Status.ContainerStatuses[0].LastTerminationState)
			}
			return nil
		}},
		{"default-runs", "docker.io/library/nginx:1.27", func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return fmt.Errorf("phase %s ip %q", p.Status.Phase, p.Status.PodIP)
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, deployment(tc.name, tc.image), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var last *corev1.Pod
			testenv.Eventually(t, 30*time.Second, "pod status", func() error {
				pod, err := onePod(ctx, e.Client, ns, "app="+tc.name)
				if err != nil {
					return err
				}
				last = pod
				return tc.check(pod)
			})
			// The status must be stable: kwok's default pod-ready stage must not take over.
			time.Sleep(1500 * time.Millisecond)
			pod, err := onePod(ctx, e.Client, ns, "app="+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.check(pod); err != nil {
				t.Fatalf("status changed after settling: %v (was %+v)", err, last.Status)
			}
		})
	}
}

func waiting(p *corev1.Pod, reason string) error {
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	}
	if got := p.Status.ContainerStatuses[0].State.Waiting.Reason; got != reason {
		return fmt.Errorf("waiting reason %q, want %q", got, reason)
	}
	return nil
}

func onePod(ctx context.Context, cs kubernetes.Interface, ns, selector string) (*corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("%d pods for %s", len(pods.Items), selector)
	}
	return &pods.Items[0], nil
}

// A lost node turns Ready=Unknown and its pods phase Unknown, and kwok leaves them so.
func TestLoseNode(t *testing.T) {
	e := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	ctx := context.Background()
	node := "kwok-lost-" + ns[len(ns)-6:]
	if err := harness.AddNode(ctx, e.Client, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pinned", Labels: map[string]string{"app": "pinned"}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "quay.io/example/app:v1"}},
		},
	}
	if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kwok starts the pod once it has taken the new node on: that took over 30 s in a
	// clean-clone CI run (the pod still Pending), so the set-up waits longer.
	testenv.Eventually(t, 90*time.Second, "pinned pod Running", func() error {
		p, err := onePod(ctx, e.Client, ns, "app=pinned")
		if err == nil && p.Status.Phase != corev1.PodRunning {
			err = fmt.Errorf("phase %s", p.Status.Phase)
		}
		return err
	})
	if err := harness.LoseNode(ctx, e.Client, node); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // give kwok a chance to (wrongly) revert anything
	p, err := onePod(ctx, e.Client, ns, "app=pinned")
	if err != nil {
		t.Fatal(err)
	}
	// As a real cluster shows it: phase still Running, Ready False, ContainersReady True.
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("pod phase %s, want Running", p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if (c.Type == corev1.PodReady && c.Status != corev1.ConditionFalse) || (c.Type == corev1.ContainersReady && c.Status != corev1.ConditionTrue) {
			t.Errorf("pod condition %s = %s", c.Type, c.Status)
		}
	}
	n, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionUnknown {
			t.Errorf("node Ready = %s, want Unknown", c.Status)
		}
	}
}

// The harness plays the cloud controller for LoadBalancer Services.
func TestLoadBalancerIngress(t *testing.T) {
	e := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "lb"},
			Ports:    []corev1.ServicePort{{Port: 8080}},
		},
	}
	created, err := e.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.ClusterIP == "" || created.Spec.Ports[0].NodePort == 0 {
		t.Errorf("LoadBalancer without ClusterIP/NodePort: %+v", created.Spec)
	}
	if err := harness.SetLoadBalancerIngress(ctx, e.Client, ns, "lb", "203.0.113.7", "lb.example.test"); err != nil {
		t.Fatal(err)
	}
	got, err := e.Client.CoreV1().Services(ns).Get(ctx, "lb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ing := got.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != "203.0.113.7" || ing[0].Hostname != "lb.example.test" {
		t.Errorf("ingress = %+v", ing)
	}
}

// A core NATS round trip and a JetStream publish that survives a server restart.
func TestNATSRoundTrip(t *testing.T) {
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("dcm.container")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("dcm.container", []byte(`{"id":"a"}`)); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(msg.Data) != `{"id":"a"}` {
		t.Fatalf("got %v, %v", msg, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "dcm-status", Subjects: []string{"dcm.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "dcm.container", []byte("before")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "reconnect", func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("status %v", nc.Status())
		}
		return nil
	})
	if _, err := js.Publish(ctx, "dcm.container", []byte("after")); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "dcm-status")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("stream holds %d messages after restart, want 2", info.State.Msgs)
	}
}
