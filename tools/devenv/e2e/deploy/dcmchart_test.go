package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// applyDCMChart creates what DCM's own chart installs for the provider
// (testdata/dcm-chart.yaml), with this test's image, namespaces, NATS and registry: the
// provider in DCM's namespace ns, its Role and RoleBinding in the containers' namespace
// (DCM's k8sContainerServiceProvider.namespace), bound to the provider's ServiceAccount.
func applyDCMChart(t *testing.T, cs kubernetes.Interface, ns, containers string, fill map[string]string, env ...corev1.EnvVar) {
	t.Helper()
	b, err := os.ReadFile("testdata/dcm-chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for k, v := range fill {
		text = strings.ReplaceAll(text, ": "+k+"\n", ": "+v+"\n")
		text = strings.ReplaceAll(text, "value: "+k+"}", "value: "+v+"}")
	}
	ctx := context.Background()
	for _, doc := range strings.Split(text, "\n---") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("testdata/dcm-chart.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(containers).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Subjects[0].Namespace = ns
			_, err = cs.RbacV1().RoleBindings(containers).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			o.Spec.Template.Spec.Containers[0].Env = append(o.Spec.Template.Spec.Containers[0].Env, env...)
			_, err = cs.AppsV1().Deployments(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = cs.CoreV1().Services(ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("testdata/dcm-chart.yaml: unexpected %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The service installed exactly as DCM's chart installs it (the provider in DCM's
// namespace, its containers in another, DCM's Role there verbatim: no Leases; no probes;
// DCM's env, so the service's default settings otherwise; one replica) is healthy and
// correct as a pod: 201, 409 for a concurrent duplicate, 204, status events, and a
// DELETED owed while NATS was down delivered by the pod that replaced the one that owed
// it.
func TestDCMChartUnchanged(t *testing.T) {
	node := testenv.RealNode(t)
	e := testenv.Cluster(t)
	srv := testenv.NATS(t)
	reg := testenv.Registry(t, srv.URL)
	ev := subscribe(t, srv.URL)
	img := serviceImage(t)
	ctx := context.Background()
	if _, err := node.PushImage(ctx, img.LayoutDir, imageRef); err != nil {
		t.Fatal(err)
	}
	natsAddr, regAddr := exposeToPods(t, node, srv.URL), exposeToPods(t, node, reg.URL)
	ns, containers := testenv.Namespace(t), testenv.Namespace(t)
	for _, n := range []string{ns, containers} {
		if err := harness.RealNodeNamespace(ctx, e.Client, n); err != nil {
			t.Fatal(err)
		}
	}
	// DCM's env sets no SP_IMAGE_REGISTRIES: the service allows its default registries,
	// so the containers run the web test image under a quay.io name.
	if err := node.TagImage(ctx, harness.TestImageNonRoot("web"), dcmImage); err != nil {
		t.Fatal(err)
	}
	// The one setting added to DCM's env is this world's plumbing: the provider resolves
	// images through the registry the node pulls every name from, as it would reach
	// quay.io itself where there is a network.
	mirror := corev1.EnvVar{Name: "SP_IMAGE_MIRRORS", Value: "*=http://" + exposeToPods(t, node, "http://"+node.Registry)}
	applyDCMChart(t, e.Client, ns, containers, map[string]string{"IMAGE": imageRef, "NAMESPACE": containers,
		"NATS_URL": "nats://" + natsAddr, "REGISTRATION_URL": "http://" + regAddr + "/api/v1alpha1"}, mirror)

	podURL := func() (string, string) {
		t.Helper()
		var url, name string
		testenv.Eventually(t, 2*time.Minute, "the provider's pod running and healthy", func() error {
			pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=dcm-k8s-container-service-provider"})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
					continue
				}
				u := "http://" + p.Status.PodIP + ":8080"
				code, body := get(u + "/health")
				if code == 200 && strings.Contains(body, `"status":"healthy"`) {
					url, name = u, p.Name
					return nil
				}
				return fmt.Errorf("%s /health: %d %s", p.Name, code, body)
			}
			return fmt.Errorf("no running pod yet")
		})
		return url, name
	}
	url, pod := podURL()
	testenv.Eventually(t, 30*time.Second, "/readyz 200 (caches synced, permissions complete under DCM's Role)", func() error {
		if code, body := get(url + "/readyz"); code != 200 {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	// Once its caches are synced it logs which kinds it keeps its records and its
	// election on.
	testenv.Eventually(t, 30*time.Second, "the start-up log says records and election are ConfigMaps", func() error {
		log, err := node.ContainerLog(ns, pod, "k8s-container-service-provider")
		if err != nil || !strings.Contains(log, "records: ConfigMaps") || !strings.Contains(log, "election: ConfigMap") {
			return fmt.Errorf("%v: %s", err, log)
		}
		return nil
	})
	api := url + "/api/v1alpha1/containers"

	// A concurrent duplicate: one 201, one 409.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = call(t, http.MethodPost, api+"?id=dup", map[string]any{"spec": withImage(spec("dup"), dcmImage)})
		}()
	}
	wg.Wait()
	if !(codes[0] == 201 && codes[1] == 409 || codes[0] == 409 && codes[1] == 201) {
		t.Errorf("concurrent creates of one id: %v, want one 201 and one 409", codes)
	}
	ev.wait(t, "dup", "RUNNING", 90*time.Second)

	// NATS goes away; the DELETE answers 204 and the DELETED is owed; the pod that owes it
	// is replaced; NATS returns; the new pod delivers it.
	srv.Stop()
	if code, body := call(t, http.MethodDelete, api+"/dup", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if err := e.Client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the old pod gone", func() error {
		if _, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("%s still there", pod)
		}
		return nil
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	url, _ = podURL()
	// Read from the registry's stream, not a plain subscription: that would miss what was
	// published while it reconnected.
	testenv.Eventually(t, 60*time.Second, "DELETED of dup stored in the dcm-status stream", func() error {
		return streamHas(srv.URL, "dup", "DELETED")
	})
	if code, _ := get(url + "/api/v1alpha1/containers/dup"); code != http.StatusNotFound {
		t.Errorf("GET after DELETED: %d, want 404", code)
	}
}

// dcmImage is the web test image under a name the service's default registries allow.
const dcmImage = "quay.io/dcm-e2e/web:v1-nonroot"

// withImage is spec with another image.
func withImage(spec map[string]any, ref string) map[string]any {
	spec["image"] = map[string]any{"reference": ref}
	return spec
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// exposeToPods makes the port of a 127.0.0.1 URL reachable from the node's pods and
// returns the address they use (10.88.0.1:PORT).
func exposeToPods(t *testing.T, node *harness.RealNode, raw string) string {
	t.Helper()
	addr, err := node.ExposeToPods(portOf(t, raw))
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func portOf(t *testing.T, raw string) int {
	t.Helper()
	u, err := neturl.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return p
}

// streamHas says whether DCM's registry's stream (dcm-status, which it creates) holds
// an event with the container's id and status.
func streamHas(natsURL, id, status string) error {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, err := js.Stream(ctx, "dcm-status")
	if err != nil {
		return err
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"dcm.container"}})
	if err != nil {
		return err
	}
	batch, err := cons.FetchNoWait(10000)
	if err != nil {
		return err
	}
	var seen []string
	for m := range batch.Messages() {
		var ce struct {
			Data struct{ ID, Status string } `json:"data"`
		}
		if json.Unmarshal(m.Data(), &ce) == nil && ce.Data.ID == id {
			if ce.Data.Status == status {
				return nil
			}
			seen = append(seen, ce.Data.Status)
		}
	}
	return fmt.Errorf("the stream has %v for %s", seen, id)
}
