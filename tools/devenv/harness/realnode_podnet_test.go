package harness_test

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// A pod on the real node gets its in-cluster config from its service account and reaches
// the apiserver through the kubernetes Service (the pods list answered as RBAC says), and
// reaches a NATS server on 127.0.0.1 at the address ExposeToPods gives; nothing else on
// the machine, and nothing off it.
func TestRealNodePodsReachTheAPIServerAndExposedPorts(t *testing.T) {
	n, ns := testenv.RealNodeNamespace(t)
	e := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	nats := testenv.NATS(t)
	u, err := url.Parse(nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	natsPort, _ := strconv.Atoi(u.Port())
	addr, err := n.ExposeToPods(natsPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.UnexposeFromPods(natsPort) })
	if again, err := n.ExposeToPods(natsPort); err != nil || again != addr {
		t.Fatalf("second ExposeToPods: %q, %v; want %q", again, err, addr)
	}
	if want := "10.88.0.1:" + u.Port(); addr != want {
		t.Errorf("ExposeToPods = %q, want %q", addr, want)
	}
	rules, _ := runOut("iptables", "-w", "5", "-t", "nat", "-S", "SP-HARNESS-EXPOSE")
	if c := strings.Count(rules, "--dport "+u.Port()+" "); c != 1 {
		t.Errorf("%d DNAT rules for port %s after two ExposeToPods, want 1:\n%s", c, u.Port(), rules)
	}

	// A service account that may list pods; the default one may not.
	if _, err := e.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// What each pod dials, and what it must see.
	dials := []struct{ addr, want string }{
		{addr, "ok INFO {"}, // NATS greets with INFO
		// A 127.0.0.1 port nobody exposed (the kubelet's API): not reachable at the bridge.
		{"10.88.0.1:" + strconv.Itoa(n.KubeletPort), "connection refused"},
		// The pod's own loopback, not the machine's.
		{"127.0.0.1:" + u.Port(), "connection refused"},
		// Another service address: routed to the bridge, refused there, not forwarded.
		{"10.96.0.10:443", "network is unreachable"},
		// Anywhere else: no route at all.
		{"192.0.2.1:80", "network is unreachable"},
	}
	var targets []string
	for _, d := range dials {
		targets = append(targets, d.addr)
	}
	pod := func(name, sa string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{
				Name: "app", Image: harness.TestImage("incluster"),
				Env: []corev1.EnvVar{{Name: "DIAL", Value: strings.Join(targets, ",")}},
			}}}}
	}
	cases := []struct{ name, sa, pods string }{
		{"reader", "reader", "incluster: pods 200 "},
		{"default", "default", "incluster: pods 403 Forbidden: "},
	}
	created := map[string]time.Time{}
	for _, c := range cases {
		created[c.name] = time.Now()
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod(c.name, c.sa), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log string
			testenv.Eventually(t, 2*time.Minute, "the incluster pod's results", func() error {
				log, err = n.ContainerLog(ns, c.name, "app")
				if err != nil {
					return err
				}
				// A result line is "<time> stdout F dial <addr>: ..."; an error's text
				// ("error dial tcp ...") must not count as another result.
				if strings.Count(log, " F dial ") < len(dials) {
					return fmt.Errorf("not all results yet:\n%s", log)
				}
				return nil
			})
			t.Logf("%s:\n%s", c.name, log)
			versionAt, ok := logLineTime(log, "incluster: version 200 ")
			if !ok {
				t.Fatalf("no successful /version through the kubernetes Service")
			}
			t.Logf("pod %s: /version answered %s after the pod was created", c.name, versionAt.Sub(created[c.name]).Round(time.Millisecond))
			if !strings.Contains(log, c.pods) {
				t.Errorf("the pods list: want a line with %q", c.pods)
			}
			for _, d := range dials {
				line := logLine(log, "dial "+d.addr+": ")
				if !strings.Contains(line, d.want) {
					t.Errorf("dial %s: got %q, want %q", d.addr, line, d.want)
				}
			}
		})
	}
}

// logLine is the first line of a CRI log holding s, without the CRI prefix.
func logLine(log, s string) string {
	for l := range strings.SplitSeq(log, "\n") {
		if i := strings.Index(l, s); i >= 0 {
			return l[i:]
		}
	}
	return ""
}

// logLineTime is the time the kubelet stamped on the first CRI log line holding s.
func logLineTime(log, s string) (time.Time, bool) {
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, s) {
			ts, _, _ := strings.Cut(l, " ")
			tm, err := time.Parse(time.RFC3339Nano, ts)
			return tm, err == nil
		}
	}
	return time.Time{}, false
}

// route_localnet, which the DNATs to 127.0.0.1 need, would also let anything on the bridge
// that routes 127.0.0.0/8 to the gateway (a pod with NET_ADMIN in its own network
// namespace, or one crafting packets) reach every service on the machine's loopback: the
// harness drops those unless its DNAT sent them (as does the kubelet's own KUBE-FIREWALL
// chain, which comes first). Played here by a network namespace with a veth on the
// bridge, routing 127.0.0.0/8 to the gateway.
func TestRealNodeBridgeGuardsLoopback(t *testing.T) {
	n := testenv.RealNode(t)
	nats := testenv.NATS(t)
	u, _ := url.Parse(nats.URL)
	exposed := testenv.NATS(t)
	eu, _ := url.Parse(exposed.URL)
	port, _ := strconv.Atoi(eu.Port())
	addr, err := n.ExposeToPods(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.UnexposeFromPods(port) })

	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	netns, host, peer := "sp-guard-"+suffix, "spg"+suffix, "spp"+suffix
	run := func(args ...string) {
		t.Helper()
		if out, err := runCombined(args...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		_, _ = runCombined("ip", "link", "delete", host)
		_, _ = runCombined("ip", "netns", "delete", netns)
	})
	run("ip", "netns", "add", netns)
	run("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	run("ip", "link", "set", peer, "netns", netns)
	run("ip", "link", "set", host, "master", harness.RealNodeBridge, "up")
	in := func(args ...string) []string { return append([]string{"ip", "netns", "exec", netns}, args...) }
	run(in("ip", "addr", "add", "10.88.255.250/16", "dev", peer)...)
	run(in("ip", "link", "set", peer, "up")...)
	run(in("ip", "link", "set", "lo", "up")...)
	run(in("sysctl", "-qw", "net.ipv4.conf."+peer+".route_localnet=1")...)
	// 127.0.0.0/8 to the gateway, ahead of the namespace's own loopback.
	run(in("ip", "route", "add", "127.0.0.0/8", "via", "10.88.0.1", "dev", peer, "table", "100")...)
	run(in("ip", "rule", "add", "pref", "10", "to", "127.0.0.0/8", "lookup", "100")...)
	run(in("ip", "rule", "add", "pref", "1000", "lookup", "local")...)
	run(in("ip", "rule", "del", "pref", "0")...)

	dial := func(hostPort string) error {
		h, p, _ := strings.Cut(hostPort, ":")
		out, err := runCombined(in("timeout", "3", "bash", "-c", "exec 3<>/dev/tcp/"+h+"/"+p)...)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	// Packets dropped for 127.0.0.0/8 in the filter table: by our guard, or by the
	// kubelet's KUBE-FIREWALL, which has the same rule and comes first in INPUT.
	dropped := func() int {
		out, _ := runOut("iptables", "-w", "5", "-t", "filter", "-L", "-v", "-n", "-x")
		sum := 0
		for l := range strings.SplitSeq(out, "\n") {
			if f := strings.Fields(l); len(f) > 8 && f[2] == "DROP" && f[8] == "127.0.0.0/8" {
				c, _ := strconv.Atoi(f[0])
				sum += c
			}
		}
		return sum
	}
	// The namespace is on the bridge: the exposed port answers at the gateway.
	testenv.Eventually(t, 10*time.Second, "the exposed port from the namespace", func() error { return dial(addr) })
	before := dropped()
	err = dial("127.0.0.1:" + u.Port())
	if err == nil {
		t.Fatalf("127.0.0.1:%s (not exposed) answered through the bridge", u.Port())
	}
	if after := dropped(); after <= before {
		rules, _ := runOut("iptables", "-w", "5", "-t", "filter", "-S")
		t.Errorf("the DROP rule counted %d packets before, %d after: the dial failed for another reason (%v)\n%s", before, after, err, rules)
	}
}

func runCombined(args ...string) (string, error) {
	b, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	return string(b), err
}
