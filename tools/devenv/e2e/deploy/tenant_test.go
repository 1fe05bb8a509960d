package deploy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/deploy"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Ports of the dial test image's pods in this test.
const (
	probePort    = 8080 // every dial pod's HTTP (/healthz, /dial)
	closedPort   = 9090 // the victim's port of visibility none
	natsRelay    = 4222 // DCM's pod: NATS, relayed to the harness's NATS on the node
	registryPort = 8081 // DCM's pod: the registry, relayed to DCM's registry on the node
)

// The chart's defaults hold against a hostile tenant on the real node, under an
// implementation that enforces NetworkPolicy (kube-network-policies): from a container
// created through the service's API, the provider's API, NATS and DCM's registry (each
// as a pod of DCM's namespace, as in a cluster) are refused, and so is another
// container's port of visibility none, while its internal port answers. Controls show
// every refused address answers others: DCM's own pod reaches the provider, NATS and the
// registry (and, like everyone, not the none port); a pod of an unrelated namespace
// reaches NATS but not the provider (its NetworkPolicy admits DCM's namespace alone).
// Before issue 34 the chart put the tenant beside the provider with no policy at all.
func TestHostileTenantReachesNothingOfDCM(t *testing.T) {
	node := testenv.RealNode(t)
	if err := node.EnforcesNetworkPolicy(); err != nil {
		t.Skip(err)
	}
	e := testenv.Cluster(t)
	cs := e.Client
	ctx := context.Background()
	srv := testenv.NATS(t)
	reg := testenv.Registry(t, srv.URL)
	ev := subscribe(t, srv.URL)
	natsOnNode, regOnNode := exposeToPods(t, node, srv.URL), exposeToPods(t, node, reg.URL)

	// DCM's namespace, where the chart installs the provider beside DCM (its default
	// dcmNamespace): DCM's NATS and registry are a pod there that relays to the node.
	dcm := testenv.Namespace(t)
	if err := harness.RealNodeNamespace(ctx, cs, dcm); err != nil {
		t.Fatal(err)
	}
	dcmPod := startDialPod(t, cs, dcm, "dcm-components", map[string]string{
		"RELAY": fmt.Sprintf("%d=%s,%d=%s", natsRelay, natsOnNode, registryPort, regOnNode)})
	natsAddr := net.JoinHostPort(dcmPod, strconv.Itoa(natsRelay))
	regAddr := net.JoinHostPort(dcmPod, strconv.Itoa(registryPort))
	// A namespace of no one's, without policies.
	outsiderNS := testenv.Namespace(t)
	if err := harness.RealNodeNamespace(ctx, cs, outsiderNS); err != nil {
		t.Fatal(err)
	}
	outsider := startDialPod(t, cs, outsiderNS, "outsider", nil)

	// The service installed the default way, talking to NATS and the registry through
	// DCM's pod.
	in, _ := install(t, srv.URL, reg.URL, 1, deploy.Options{Namespace: dcm, Values: map[string]any{
		"natsURL": "nats://" + natsAddr, "registrationURL": "http://" + regAddr + "/api/v1alpha1"}})
	if len(in.URLs) != 1 {
		t.Fatalf("pod URLs %v, want one", in.URLs)
	}
	api := in.URLs[0] + "/api/v1alpha1/containers"
	providerAddr := strings.TrimPrefix(in.URLs[0], "http://")
	testenv.Eventually(t, 60*time.Second, "registered with DCM's registry through DCM's pod", func() error {
		code, body := call(t, http.MethodGet, reg.URL+"/providers", nil)
		if code != 200 || !strings.Contains(string(body), in.URLs[0]) {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})

	// Two tenants: a victim with an internal port and a none port, and a hostile one.
	victim := spec("victim")
	victim["image"] = map[string]any{"reference": harness.TestImageNonRoot("dial")}
	victim["process"] = map[string]any{"env": []any{map[string]any{"name": "PORTS", "value": fmt.Sprintf("%d,%d", probePort, closedPort)}}}
	victim["network"] = map[string]any{"ports": []any{
		map[string]any{"container_port": probePort, "visibility": "internal"},
		map[string]any{"container_port": closedPort, "visibility": "none"}}}
	hostile := spec("hostile")
	hostile["image"] = map[string]any{"reference": harness.TestImageNonRoot("dial")}
	for id, s := range map[string]map[string]any{"victim": victim, "hostile": hostile} {
		if code, body := call(t, http.MethodPost, api+"?id="+id, map[string]any{"spec": s}); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, code, body)
		}
	}
	// Their RUNNING comes through NATS, relayed by DCM's pod.
	ev.wait(t, "victim", "RUNNING", 90*time.Second)
	ev.wait(t, "hostile", "RUNNING", 90*time.Second)
	victimPod := tenantPod(t, cs, in.ContainersNamespace, "victim")
	hostilePod := tenantPod(t, cs, in.ContainersNamespace, "hostile")
	var names []string
	for _, p := range victimPod.Spec.Containers[0].Ports {
		names = append(names, fmt.Sprintf("%d=%q", p.ContainerPort, p.Name))
	}
	if !slices.Equal(names, []string{`8080="exposed-0"`, `9090=""`}) {
		t.Errorf("the victim's ports %v: want 8080 named exposed-0 (internal) and 9090 unnamed (none)", names)
	}
	victimOpen := net.JoinHostPort(victimPod.Status.PodIP, strconv.Itoa(probePort))
	victimClosed := net.JoinHostPort(victimPod.Status.PodIP, strconv.Itoa(closedPort))
	hostileIP := hostilePod.Status.PodIP
	// Both of the victim's ports listen (the node's own root processes are never
	// filtered), and the hostile tenant's probe answers.
	testenv.Eventually(t, 30*time.Second, "the tenants' servers listening", func() error {
		for _, a := range []string{victimOpen, victimClosed, net.JoinHostPort(hostileIP, strconv.Itoa(probePort))} {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	})
	// The enforcer knows every pod a policy selects (the provider and both tenants): from
	// then on it judges each of their connections, so what follows is decided once.
	start := time.Now()
	want := []string{strings.Split(providerAddr, ":")[0], victimPod.Status.PodIP, hostileIP}
	testenv.Eventually(t, 60*time.Second, "kube-network-policies filtering the provider and the tenants", func() error {
		ips, err := node.NetworkPolicyPodIPs(ctx)
		if err != nil {
			return err
		}
		for _, ip := range want {
			if !slices.Contains(ips, ip) {
				return fmt.Errorf("filtered pods %v, want %v among them", ips, want)
			}
		}
		return nil
	})
	t.Logf("the enforcer filters %v (%s after the tenants ran); its log: %s", want, time.Since(start).Round(10*time.Millisecond), node.NetworkPolicyLog())

	type probe struct{ from, fromIP, what, addr, want string }
	probes := []probe{
		{"hostile tenant", hostileIP, "the provider's API", providerAddr, "refused"},
		{"hostile tenant", hostileIP, "NATS", natsAddr, "refused"},
		{"hostile tenant", hostileIP, "DCM's registry", regAddr, "refused"},
		{"hostile tenant", hostileIP, "another tenant's internal port", victimOpen, "ok"},
		{"hostile tenant", hostileIP, "another tenant's none port", victimClosed, "refused"},
		{"DCM's pod", dcmPod, "the provider's API", providerAddr, "ok"},
		{"DCM's pod", dcmPod, "NATS", natsAddr, "ok INFO"},
		{"DCM's pod", dcmPod, "DCM's registry", regAddr, "ok"},
		{"DCM's pod", dcmPod, "a tenant's internal port", victimOpen, "ok"},
		{"DCM's pod", dcmPod, "a tenant's none port", victimClosed, "refused"},
		{"another namespace's pod", outsider, "the provider's API", providerAddr, "refused"},
		{"another namespace's pod", outsider, "NATS", natsAddr, "ok INFO"},
		{"another namespace's pod", outsider, "a tenant's internal port", victimOpen, "ok"},
		{"another namespace's pod", outsider, "a tenant's none port", victimClosed, "refused"},
	}
	results := make([]string, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = dialFrom(p.fromIP, p.addr) }()
	}
	wg.Wait()
	for i, p := range probes {
		t.Logf("%-24s -> %-32s %-22s %s", p.from, p.what, p.addr, results[i])
		if !matches(results[i], p.want) {
			t.Errorf("%s -> %s (%s): %s, want %s", p.from, p.what, p.addr, results[i], p.want)
		}
	}

	// What kube-network-policies does not judge: a pod's connections to its own node's
	// addresses. On this machine NATS and DCM's registry listen on the node (the relay
	// above reaches them there) and so does the apiserver, behind the kubernetes Service.
	for _, tc := range []struct{ what, addr string }{
		{"NATS on the node", natsOnNode},
		{"DCM's registry on the node", regOnNode},
		{"the apiserver (the kubernetes Service)", kubernetesService(t, cs)},
	} {
		t.Run("node address/"+tc.what, func(t *testing.T) {
			got := dialFrom(hostileIP, tc.addr)
			t.Logf("hostile tenant -> %s (%s): %s", tc.what, tc.addr, got)
			if matches(got, "ok") {
				t.Skipf("%s at %s answers the tenant: the containers' egress policy refuses it (10.0.0.0/8 is excepted), but kube-network-policies %s "+
					"judges packets only on the postrouting hook, which traffic to the node's own addresses (INPUT) never passes; "+
					"implementations that filter at the pod's interface (Calico, Cilium) refuse it", tc.what, tc.addr, harness.KubeNetworkPoliciesVersion)
			}
		})
	}
}

// matches says whether a dial result is what was wanted: "refused" is a connection that
// timed out (the enforcer drops it; a closed port would answer at once), anything else a
// prefix of the answer ("ok", "ok INFO" for NATS's greeting).
func matches(result, want string) bool {
	if want == "refused" {
		return strings.HasPrefix(result, "error") && strings.Contains(result, "i/o timeout")
	}
	return strings.HasPrefix(result, want)
}

// dialFrom asks the dial pod at ip to open one TCP connection to addr (2 s timeout).
func dialFrom(ip, addr string) string {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s/dial?addr=%s&timeout=2s", net.JoinHostPort(ip, strconv.Itoa(probePort)), addr))
	if err != nil {
		return "probe unreachable: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

// startDialPod runs the dial test image as a pod of ns (not a tenant: made by the test)
// and returns its IP once it serves.
func startDialPod(t *testing.T, cs kubernetes.Interface, ns, name string, env map[string]string) string {
	t.Helper()
	ctx := context.Background()
	c := corev1.Container{
		Name:  "dial",
		Image: harness.TestImageNonRoot("dial"),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(probePort)}}},
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}
	for k, v := range env {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}, AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	testenv.Eventually(t, 90*time.Second, "pod "+ns+"/"+name+" ready", func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
				ip = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
	return ip
}

// tenantPod is the running pod of the container id in the containers' namespace ns.
func tenantPod(t *testing.T, cs kubernetes.Interface, ns, id string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testenv.Eventually(t, 60*time.Second, "the pod of "+id, func() error {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "dcm.project/dcm-instance-id=" + id})
		if err != nil {
			return err
		}
		for i, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				pod = &pods.Items[i]
				return nil
			}
		}
		return fmt.Errorf("%d pods, none running", len(pods.Items))
	})
	return pod
}

// kubernetesService is the kubernetes Service's address, which the harness DNATs to the
// apiserver on the node.
func kubernetesService(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	svc, err := cs.CoreV1().Services(metav1.NamespaceDefault).Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
}
