package harness_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// webDeployment is the local "web" image with a readiness probe on /healthz:8080. Like the
// service's Deployments it sets no node selector, toleration or imagePullPolicy: the
// namespace sends it to the real node, the :v1 tag makes the policy IfNotPresent.
func webDeployment(name string) *appsv1.Deployment {
	d := deployment(name, harness.TestImage("web"))
	d.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	return d
}

// A pod in a RealNodeNamespace runs on the real kubelet: Running and Ready (its readiness
// probe answered by the web image) with an address from the node's bridge; an image that
// was never pushed to the node's registry stays Pending in ErrImagePull / ImagePullBackOff.
func TestRealNodeRunsPods(t *testing.T) {
	n, ns := testenv.RealNodeNamespace(t)
	e := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	node, err := e.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[harness.RealNodeLabel] != "true" {
		t.Errorf("node labels %v lack %s=true", node.Labels, harness.RealNodeLabel)
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(tn corev1.Taint) bool {
		return tn.Key == harness.RealNodeLabel && tn.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("node taints %v lack %s:NoSchedule", node.Spec.Taints, harness.RealNodeLabel)
	}
	t.Logf("node %s: kubelet %s, runtime %s", n.Name, node.Status.NodeInfo.KubeletVersion, node.Status.NodeInfo.ContainerRuntimeVersion)

	web := webDeployment("web")
	start := time.Now()
	if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	missing := deployment("missing", harness.MissingImage)
	if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, missing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	_, podNet, _ := net.ParseCIDR(harness.RealNodePodCIDR)
	var p *corev1.Pod
	testenv.Eventually(t, 2*time.Minute, "web pod Running and Ready on the real node", func() error {
		p, err = onePod(ctx, e.Client, ns, "app=web")
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || !podReady(p) {
			return fmt.Errorf("phase %s, ready %v, containers %+v", p.Status.Phase, podReady(p), p.Status.ContainerStatuses)
		}
		return nil
	})
	t.Logf("web pod %s Ready %s after the Deployment was created, IP %s", p.Name, time.Since(start).Round(100*time.Millisecond), p.Status.PodIP)
	if p.Spec.NodeName != harness.RealNodeName {
		t.Errorf("web pod on %q, want %q", p.Spec.NodeName, harness.RealNodeName)
	}
	if ip := net.ParseIP(p.Status.PodIP); ip == nil || !podNet.Contains(ip) {
		t.Errorf("pod IP %q not in %s", p.Status.PodIP, harness.RealNodePodCIDR)
	}
	if p.Spec.NodeSelector[harness.RealNodeLabel] != "true" {
		t.Errorf("namespace did not add the node selector: %v", p.Spec.NodeSelector)
	}
	if p.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %s, want IfNotPresent", p.Spec.Containers[0].ImagePullPolicy)
	}
	if log, err := n.ContainerLog(ns, p.Name, "app"); err != nil || !strings.Contains(log, "listening on :8080") {
		t.Errorf("container log: %q, %v", log, err)
	}

	testenv.Eventually(t, 2*time.Minute, "missing-image pod Pending in ErrImagePull/ImagePullBackOff", func() error {
		p, err := onePod(ctx, e.Client, ns, "app=missing")
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		if err := waiting(p, "ErrImagePull"); err != nil {
			return waiting(p, "ImagePullBackOff")
		}
		return nil
	})
}

// Every test image behaves on the real kubelet as the status tests rely on (the facts the
// service's status mapping must meet).
func TestRealNodeWorkloads(t *testing.T) {
	_, ns := testenv.RealNodeNamespace(t)
	e := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	dropAll := &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	terminated := func(reason string, code int32) func(*corev1.Pod) error {
		return func(p *corev1.Pod) error {
			if len(p.Status.ContainerStatuses) == 0 {
				return fmt.Errorf("no container status yet (phase %s)", p.Status.Phase)
			}
			cs := p.Status.ContainerStatuses[0]
			for _, st := range []corev1.ContainerState{cs.LastTerminationState, cs.State} {
				if tm := st.Terminated; tm != nil && tm.Reason == reason && tm.ExitCode == code {
					return nil
				}
			}
			return fmt.Errorf("want a termination %s/%d; state %+v, last %+v", reason, code, cs.State, cs.LastTerminationState)
		}
	}
	crashLoop := func(reason string, code int32) func(*corev1.Pod) error {
		return func(p *corev1.Pod) error {
			if err := terminated(reason, code)(p); err != nil {
				return err
			}
			if err := waiting(p, "CrashLoopBackOff"); err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s, want Running", p.Status.Phase)
			}
			return nil
		}
	}
	waitingFor := func(reason string) func(*corev1.Pod) error {
		return func(p *corev1.Pod) error { return waiting(p, reason) }
	}
	restricted := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	running := func(ready bool) func(*corev1.Pod) error {
		return func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodRunning || podReady(p) != ready {
				return fmt.Errorf("phase %s, ready %v; want Running, ready %v", p.Status.Phase, podReady(p), ready)
			}
			return nil
		}
	}
	cases := []struct {
		name, role string
		edit       func(*corev1.Container)
		want       func(*corev1.Pod) error
	}{
		{"crash", "crash", nil, crashLoop("Error", 1)},
		{"exit0", "exit0", nil, crashLoop("Completed", 0)},
		{"oom", "oom", func(c *corev1.Container) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		}, terminated("OOMKilled", 137)},
		{"setuid-dropped", "setuid", func(c *corev1.Container) { c.SecurityContext = dropAll }, crashLoop("Error", 3)},
		{"setuid", "setuid", nil, running(true)},
		{"web80-dropped", "web80", func(c *corev1.Container) { c.SecurityContext = dropAll }, crashLoop("Error", 1)},
		// The service's restricted pod security profile: a non-root image runs ...
		{"restricted", "web-nonroot", func(c *corev1.Container) { c.SecurityContext = restricted() }, running(true)},
		// ... a root one is refused by the kubelet before it starts.
		{"restricted-root", "web", func(c *corev1.Container) { c.SecurityContext = restricted() }, waitingFor("CreateContainerConfigError")},
		{"notready", "web", func(c *corev1.Container) {
			c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(9999)}}}
		}, running(false)},
	}
	for _, c := range cases {
		image := harness.TestImage(c.role)
		if role, ok := strings.CutSuffix(c.role, "-nonroot"); ok {
			image = harness.TestImageNonRoot(role)
		}
		d := deployment(c.name, image)
		if c.edit != nil {
			c.edit(&d.Spec.Template.Spec.Containers[0])
		}
		if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.Eventually(t, 2*time.Minute, c.name, func() error {
				p, err := onePod(ctx, e.Client, ns, "app="+c.name)
				if err != nil {
					return err
				}
				return c.want(p)
			})
		})
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StopKubelet and StartKubelet take the kubelet away and bring it back; containerd keeps
// the pods running meanwhile. Only on a node this test binary owns: on the node shared by
// a whole `make test` run it would disturb other packages' tests.
func TestRealNodeKubeletRestart(t *testing.T) {
	n := testenv.RealNodeExclusive(t)
	if !n.Owned() {
		t.Skip("the real node is shared with other test packages (make test); run this package on its own")
	}
	e := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := testenv.Namespace(t)
	if err := harness.RealNodeNamespace(ctx, e.Client, ns); err != nil {
		t.Fatal(err)
	}
	web := webDeployment("web")
	if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyPod := func() (*corev1.Pod, error) {
		p, err := onePod(ctx, e.Client, ns, "app=web")
		if err == nil && !podReady(p) {
			err = fmt.Errorf("pod %s not Ready", p.Name)
		}
		return p, err
	}
	var before *corev1.Pod
	testenv.Eventually(t, 2*time.Minute, "web Ready", func() (err error) { before, err = readyPod(); return err })

	if err := n.StopKubelet(); err != nil {
		t.Fatal(err)
	}
	if err := n.StartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "web still Ready after the kubelet restart", func() error {
		p, err := readyPod()
		if err == nil && (p.UID != before.UID || p.Status.ContainerStatuses[0].RestartCount != 0) {
			return fmt.Errorf("pod replaced or restarted: %s restarts %d", p.Name, p.Status.ContainerStatuses[0].RestartCount)
		}
		return err
	})
}

// After Stop nothing of the node is left on the machine: no process, no bridge or veth, no
// CNI config, no mount, no cgroup, no KUBE-* or SP-HARNESS-* iptables chain (nor a jump to
// one), sysctls as they were. This
// starts (and stops) a node of its own, so it runs only when this test binary owns the
// machine's real node (go test -run RealNode ./tools/devenv/harness/ from the root).
func TestRealNodeStopLeavesNothing(t *testing.T) {
	shared := testenv.RealNodeExclusive(t)
	if !shared.Owned() {
		t.Skip("the real node is shared with other test packages (make test); run this package on its own")
	}
	e := testenv.Cluster(t)
	if err := shared.Stop(); err != nil { // the test binary's node; Main's Stop is then a no-op
		t.Fatal(err)
	}
	before := hostSnapshot(t, "")

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	n, err := harness.StartRealNode(ctx, &harness.Cluster{Kubeconfig: e.Kubeconfig}, dir, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node Ready %s after StartRealNode", time.Since(start).Round(100*time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = n.Stop()
		}
	})
	ns := testenv.Namespace(t)
	if err := harness.RealNodeNamespace(ctx, e.Client, ns); err != nil {
		t.Fatal(err)
	}
	web := webDeployment("web")
	if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "web Ready", func() error {
		p, err := onePod(ctx, e.Client, ns, "app=web")
		if err == nil && !podReady(p) {
			err = fmt.Errorf("pod %s not Ready", p.Name)
		}
		return err
	})
	// An exposure made by another process would look the same: a rule in our chain.
	regPort, _ := strconv.Atoi(n.Registry[strings.LastIndex(n.Registry, ":")+1:])
	if _, err := n.ExposeToPods(regPort); err != nil {
		t.Fatal(err)
	}
	during := hostSnapshot(t, dir)
	if !during.bridge || len(during.mounts) == 0 || len(during.processes) == 0 ||
		!slices.Contains(during.chains, "iptables nat -N SP-HARNESS-EXPOSE") {
		t.Fatalf("the snapshot does not see the running node: %+v", during)
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + harness.RealNodeBridge + "/route_localnet"); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("route_localnet on %s: %q, %v; want 1", harness.RealNodeBridge, b, err)
	}

	stopStart := time.Now()
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	t.Logf("Stop took %s", time.Since(stopStart).Round(100*time.Millisecond))
	if err := n.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	after := hostSnapshot(t, dir)
	if after.bridge {
		t.Errorf("%s still exists", harness.RealNodeBridge)
	}
	for name, got := range map[string][]string{"processes": after.processes, "mounts": after.mounts,
		"cgroups": after.cgroups, "CNI configs in /etc/cni/net.d": after.cniConfigs, "state folders": after.stateDirs} {
		if len(got) > 0 {
			t.Errorf("%s left: %v", name, got)
		}
	}
	for _, c := range []struct {
		what          string
		before, after []string
	}{{"links", before.links, after.links}, {"iptables chains", before.chains, after.chains},
		{"sysctls", before.sysctls, after.sysctls}, {"shared files", before.shared, after.shared}} {
		if !slices.Equal(c.before, c.after) {
			t.Errorf("%s changed:\nbefore %v\nafter  %v", c.what, c.before, c.after)
		}
	}
	if _, err := e.Client.CoreV1().Nodes().Get(ctx, harness.RealNodeName, metav1.GetOptions{}); err == nil {
		t.Errorf("Node %s still registered", harness.RealNodeName)
	}
}

type snapshot struct {
	bridge                                            bool
	processes, mounts, cgroups, cniConfigs, stateDirs []string
	links, chains, sysctls, shared                    []string
}

// hostSnapshot reads, from the host only, everything a real node could leave behind.
func hostSnapshot(t *testing.T, dir string) snapshot {
	t.Helper()
	var s snapshot
	ours := func(text string) bool {
		return strings.Contains(text, "sp-harness-realnode") || (dir != "" && strings.Contains(text, dir))
	}
	_, err := os.Stat("/sys/class/net/" + harness.RealNodeBridge)
	s.bridge = err == nil
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline")); err == nil && ours(string(b)) {
			s.processes = append(s.processes, p.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if ours(l) {
				s.mounts = append(s.mounts, l)
			}
		}
	}
	s.cgroups, _ = filepath.Glob("/sys/fs/cgroup/*/sp-harness-realnode")
	if more, _ := filepath.Glob("/sys/fs/cgroup/sp-harness-realnode"); len(more) > 0 {
		s.cgroups = append(s.cgroups, more...)
	}
	confs, _ := filepath.Glob("/etc/cni/net.d/*")
	for _, c := range confs {
		if b, err := os.ReadFile(c); err == nil && (strings.Contains(string(b), "10.88.") || ours(string(b))) {
			s.cniConfigs = append(s.cniConfigs, c)
		}
	}
	for _, d := range []string{"/var/lib/sp-harness-realnode", "/run/sp-harness-realnode"} {
		if _, err := os.Stat(d); err == nil {
			s.stateDirs = append(s.stateDirs, d)
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		s.links = append(s.links, l.Name())
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, _ := runOut(cmd, "-w", "5", "-t", table, "-S")
			for l := range strings.SplitSeq(out, "\n") {
				if strings.HasPrefix(l, "-N ") || strings.Contains(l, "-j SP-HARNESS-") {
					s.chains = append(s.chains, cmd+" "+table+" "+l)
				}
			}
		}
	}
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
		"net/ipv4/conf/all/route_localnet", "net/ipv4/conf/default/route_localnet"} {
		b, _ := os.ReadFile("/proc/sys/" + k)
		s.sysctls = append(s.sysctls, k+"="+strings.TrimSpace(string(b)))
	}
	for _, g := range []string{"/run/containerd/s/*", "/var/lib/cni/*", "/var/lib/cni/*/*", "/var/log/containers/*", "/run/netns/*", "/run/containerd"} {
		m, _ := filepath.Glob(g)
		s.shared = append(s.shared, m...)
	}
	return s
}

func runOut(name string, args ...string) (string, error) {
	b, err := exec.Command(name, args...).Output()
	return string(b), err
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
