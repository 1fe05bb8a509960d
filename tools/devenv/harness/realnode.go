package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// A real node beside kwok: a real kubelet (built from the same module graph as the control
// plane) with containerd, runc and a CNI bridge from Debian's packages, joined to the
// harness control plane. kwok plays the kubelet by rules we write; this one shows what a
// real cluster does (CrashLoopBackOff timings, OOMKilled, image pull errors, probes).
//
// There is one real node per machine: its bridge, sysctls and state folders are
// machine-wide. A record in /run/sp-harness-realnode/node.json says who runs it, so
// `sp-harness down`, test binaries and a later run can find, share or clean it up.

const (
	// RealNodeName is the real node's name (the kubelet's --hostname-override).
	RealNodeName = "real-node-0"
	// RealNodeLabel is the key of the node's label (value "true") and of its NoSchedule
	// taint (value "true"): only pods that select and tolerate it land there (see
	// RealNodeNamespace).
	RealNodeLabel = "realnode"
)

// ErrRealNodeBusy means another run's real node is running on this machine.
var ErrRealNodeBusy = errors.New("a real node is already running on this machine")

// RealNode is a running real node: a kubelet and its containerd, and a NetworkPolicy
// enforcer (realnode_netpol.go), started and stopped by PID like the control plane.
type RealNode struct {
	// Name is the Node's name (RealNodeName).
	Name string
	// Dir holds the node's config files and the logs (kubelet.log, containerd.log).
	Dir string
	// Kubeconfig is the cluster's admin kubeconfig, which the kubelet uses.
	Kubeconfig string
	// Socket is containerd's socket, for ctr/crictl (`ctr --address SOCKET -n k8s.io ...`).
	Socket string
	// KubeletPort and HealthzPort are the kubelet's API and healthz ports on 127.0.0.1.
	KubeletPort, HealthzPort int
	// Registry is the node's image registry, "127.0.0.1:PORT": the only place its
	// containerd pulls from (PushImage puts images there).
	Registry string

	rec   realNodeRecord
	owned bool // started by this process
	out   io.Writer
}

// realNodeRecord is the machine-wide record: what runs (by PID) and what the host looked
// like before, so anyone can stop it and put the host back.
type realNodeRecord struct {
	Dir         string   `json:"dir"`
	Kubeconfig  string   `json:"kubeconfig"`
	KubeletBin  string   `json:"kubeletBin"`
	KubeletArgs []string `json:"kubeletArgs"`
	KubeletPort int      `json:"kubeletPort"`
	HealthzPort int      `json:"healthzPort"`
	Registry    string   `json:"registry"`
	// Detached processes outlive the process that started them (make cluster-up).
	Detached   bool     `json:"detached"`
	Containerd *process `json:"containerd,omitempty"`
	// ImageRegistry is the node's registry (sp-image-registry) on Registry.
	ImageRegistry *process `json:"imageRegistry,omitempty"`
	Kubelet       *process `json:"kubelet,omitempty"`
	// NetworkPolicies is the node's NetworkPolicy enforcer (realnode_netpol.go), or nil
	// with NetworkPoliciesUnavailable saying why.
	NetworkPolicies            *process  `json:"networkPolicies,omitempty"`
	NetworkPoliciesUnavailable string    `json:"networkPoliciesUnavailable,omitempty"`
	Host                       hostState `json:"host"`
	// PodNetwork is what the harness set up so pods reach the apiserver and the ports
	// given to ExposeToPods (realnode_expose.go).
	PodNetwork podNetwork `json:"podNetwork"`
}

// RealNodeSupported says why a real node cannot run here, or nil when it can.
func RealNodeSupported() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("a real node needs Linux (this is %s)", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root: containerd, runc and the kubelet manage mounts, cgroups and the network")
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\toverlay\n") {
		return errors.New("no overlayfs (no \"overlay\" in /proc/filesystems): containerd's overlayfs snapshotter cannot work")
	}
	if err := needCapabilities(); err != nil {
		return err
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		return errors.New("no /sys/fs/cgroup: the kubelet needs cgroups")
	}
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		return errors.New("no /dev/kmsg: the kubelet's OOM watcher reads it")
	}
	if _, err := os.Stat(systemKubeletDir); err == nil {
		// The kubelet's device-plugin folder is /var/lib/kubelet/device-plugins whatever
		// its --root-dir, and it empties it at start: never beside another kubelet.
		if rec, err := loadRecord(); err != nil || rec.Host.Existed[systemKubeletDir] {
			return fmt.Errorf("%s exists (another kubelet on this machine?): the real node's kubelet would share its device-plugin folder", systemKubeletDir)
		}
	}
	if _, err := exec.LookPath("go"); err != nil {
		return errors.New("no go command: the kubelet and the test images are built from source")
	}
	if missing := missingPackages(); len(missing) > 0 {
		if _, err := exec.LookPath("apt-get"); err != nil {
			return fmt.Errorf("%s missing and no apt-get to install them", strings.Join(missing, ", "))
		}
	}
	return nil
}

// needCapabilities checks the effective capabilities a container-in-a-container often
// lacks: CAP_SYS_ADMIN (mounts) and CAP_NET_ADMIN (bridge, veths).
func needCapabilities() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			capEff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return err
			}
			const capNetAdmin, capSysAdmin = 12, 21
			if capEff&(1<<capSysAdmin) == 0 || capEff&(1<<capNetAdmin) == 0 {
				return errors.New("root here lacks CAP_SYS_ADMIN or CAP_NET_ADMIN (an unprivileged container?)")
			}
			return nil
		}
	}
	return nil
}

// StartRealNode adds a real node to cluster c: it installs the Debian packages when
// missing, builds the kubelet (first time: 10-25 minutes, progress to out) and the test
// images, starts containerd and the kubelet by PID with their state under dir and the
// harness's own /var/lib and /run folders, and returns once the Node is Ready. Left-overs
// of a crashed earlier run are cleaned first. When c was started detached (make
// cluster-up) the node's processes are too; otherwise they die with this process.
func StartRealNode(ctx context.Context, c *Cluster, dir string, out io.Writer) (n *RealNode, err error) {
	if out == nil {
		out = io.Discard
	}
	if err := RealNodeSupported(); err != nil {
		return nil, err
	}
	if c == nil || c.Kubeconfig == "" {
		return nil, errors.New("StartRealNode: the cluster has no kubeconfig")
	}
	// The kubelet joins whatever cluster the kubeconfig names, with its credential: only
	// ever a harness control plane.
	if kc, err := clientcmd.LoadFromFile(c.Kubeconfig); err != nil || kc.CurrentContext != ContextName {
		return nil, fmt.Errorf("StartRealNode: %s is not a harness kubeconfig (current context not %q): refusing to join a real kubelet to it",
			c.Kubeconfig, ContextName)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := checkNotBusy(); err != nil { // before minutes of building
		return nil, err
	}
	if err := ensureRealNodePackages(ctx, dir, out); err != nil {
		return nil, err
	}
	kubelet, err := EnsureKubelet(ctx, out)
	if err != nil {
		return nil, err
	}
	netpol, err := EnsureNetworkPolicyEnforcer(ctx, out)
	if err != nil {
		return nil, err
	}
	if kubelet, err = filepath.EvalSymlinks(kubelet); err != nil { // /proc/PID/exe is resolved
		return nil, err
	}
	testimage, registryBin, err := buildNodeBinaries(ctx, dir)
	if err != nil {
		return nil, err
	}
	images, err := testImages(testimage)
	if err != nil {
		return nil, fmt.Errorf("making the test images: %w", err)
	}
	containerd, err := lookPathResolved("containerd")
	if err != nil {
		return nil, err
	}

	unlock, err := lockRealNode()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkNotBusy(); err != nil {
		return nil, err
	}
	if err := cleanupRealNode(ctx, out); err != nil {
		return nil, fmt.Errorf("cleaning up after an earlier real node: %w", err)
	}
	if _, err := os.Stat("/sys/class/net/" + RealNodeBridge); err == nil {
		return nil, fmt.Errorf("a network interface %s exists and is not the harness's: the real node's bridge would clash with it", RealNodeBridge)
	}
	ports, err := proc.FreePorts(3)
	if err != nil {
		return nil, err
	}
	registry := "127.0.0.1:" + strconv.Itoa(ports[2])
	n = &RealNode{Name: RealNodeName, Dir: dir, Kubeconfig: c.Kubeconfig, Socket: containerdSocket,
		KubeletPort: ports[0], HealthzPort: ports[1], Registry: registry, owned: true, out: out}
	n.rec = realNodeRecord{Dir: dir, Kubeconfig: c.Kubeconfig, KubeletBin: kubelet,
		KubeletPort: ports[0], HealthzPort: ports[1], Registry: registry, Detached: c.detached, Host: recordHost()}
	// The clean-up's own handle: `return nil, err` sets n to nil before this runs.
	node := n
	defer func() {
		if err != nil {
			_ = node.stop(context.Background())
		}
	}()
	start := time.Now()
	fmt.Fprintf(out, "harness: starting real node %s (containerd + kubelet %s) in %s\n", RealNodeName, KubernetesVersion, dir)

	// Record the host's state before changing anything, so a crash at any later point
	// is cleaned up by the next run.
	for _, d := range []string{realNodeLib, realNodeRun, containerdRoot, containerdState, kubeletRoot, podLogsDir, ipamDir, cniConfDir,
		filepath.Join(registryHostsDir, "_default")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.save(); err != nil {
		return nil, err
	}
	if err := makeCgroupRoot(); err != nil {
		return nil, err
	}
	files := map[string]string{
		filepath.Join(dir, "containerd.toml"):                     containerdConfig(),
		filepath.Join(cniConfDir, "10-realnode.conflist"):         cniConflist(),
		filepath.Join(dir, "kubelet.yaml"):                        kubeletConfig(n.KubeletPort, n.HealthzPort),
		filepath.Join(registryHostsDir, "_default", "hosts.toml"): hostsTOML(registry),
	}
	for p, content := range files {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}

	// Before any pod: the bridge, with route_localnet, and the DNATs to 127.0.0.1.
	if err := n.setupPodNetwork(ctx); err != nil {
		return nil, fmt.Errorf("the pods' network: %w", err)
	}
	if err := n.startImageRegistry(ctx, registryBin, images); err != nil {
		return nil, err
	}
	// No proxy: the registry is on loopback (which Go never proxies anyway), and nothing
	// else may be reached.
	if n.rec.Containerd, err = startProcess("containerd", containerd,
		[]string{"--config", filepath.Join(dir, "containerd.toml")}, dir, n.rec.Detached, sbinPath(),
		"HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=", "NO_PROXY=*", "no_proxy=*"); err != nil {
		return nil, err
	}
	if err := n.save(); err != nil {
		return nil, err
	}
	if err := waitFor("containerd", 30*time.Second, []*process{n.rec.Containerd}, func() error {
		_, err := n.ctr(ctx, "version")
		return err
	}); err != nil {
		return nil, err
	}

	n.rec.KubeletArgs = []string{
		"--config=" + filepath.Join(dir, "kubelet.yaml"),
		"--kubeconfig=" + c.Kubeconfig,
		"--hostname-override=" + RealNodeName,
		"--node-labels=" + RealNodeLabel + "=true",
		"--root-dir=" + kubeletRoot,
		"--cert-dir=" + filepath.Join(kubeletRoot, "pki"),
		"--v=2",
	}
	kubeletStart := time.Now()
	if err := n.startKubelet(ctx, n.rec.Detached); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "harness: real node %s Ready in %s (%s after the kubelet started)\n", RealNodeName,
		time.Since(start).Round(100*time.Millisecond), time.Since(kubeletStart).Round(100*time.Millisecond))
	if err := n.startNetworkPolicies(ctx, netpol); err != nil {
		return nil, fmt.Errorf("the NetworkPolicy enforcer: %w", err)
	}
	return n, nil
}

// Owned reports whether this process started the node (then Stop is its job); a node
// from LoadRealNode is shared with whoever started it.
func (n *RealNode) Owned() bool { return n.owned }

// KubeletLog and ContainerdLog are the node's log files.
func (n *RealNode) KubeletLog() string    { return filepath.Join(n.Dir, "kubelet.log") }
func (n *RealNode) ContainerdLog() string { return filepath.Join(n.Dir, "containerd.log") }

// ContainerLog reads a container's current log file as the kubelet wrote it (CRI format:
// "<time> <stream> <tag> <line>" per line). `kubectl logs` cannot be used for this node:
// the apiserver would dial the node by a name that only the machine's DNS could resolve.
func (n *RealNode) ContainerLog(namespace, pod, container string) (string, error) {
	dirs, err := filepath.Glob(filepath.Join(podLogsDir, namespace+"_"+pod+"_*", container))
	if err != nil || len(dirs) == 0 {
		return "", fmt.Errorf("no logs for %s/%s/%s under %s", namespace, pod, container, podLogsDir)
	}
	logs, _ := filepath.Glob(filepath.Join(dirs[0], "*.log"))
	if len(logs) == 0 {
		return "", fmt.Errorf("no log files in %s", dirs[0])
	}
	b, err := os.ReadFile(logs[len(logs)-1]) // N.log, highest restart count last for N < 10
	return string(b), err
}
