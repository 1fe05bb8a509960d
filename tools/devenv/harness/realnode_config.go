package harness

import (
	"fmt"
	"path/filepath"
)

// Where the real node keeps its state. Fixed, harness-owned names (never containerd's or
// the kubelet's defaults) so a system containerd or kubelet on the machine is never
// touched, and so clean-up after a crashed run finds everything without any record. The
// bridge, the host sysctls and the kubelet's iptables chains are machine-wide anyway:
// there is one real node per machine at a time.
const (
	realNodeLib = "/var/lib/sp-harness-realnode" // containerd root, kubelet root, pod logs, IPAM
	realNodeRun = "/run/sp-harness-realnode"     // containerd state and socket, runc state, netns, CNI conf, record
	// realNodeCgroup is the kubelet's cgroupRoot (pods) and containerd's own cgroup parent
	// (containerd and its shims), in every cgroup hierarchy: whatever a crash leaves
	// running is found there and killed by PID.
	realNodeCgroup = "/sp-harness-realnode"
	// realNodeNetwork names the CNI network; libcni's result cache files start with it.
	realNodeNetwork = "sp-harness-realnode"
	// RealNodeBridge is the node's Linux bridge; pods get 10.88.0.0/16 addresses on it.
	RealNodeBridge = "cni0"
	// RealNodePodCIDR is where pod IPs come from. Pod traffic stays on the machine: no
	// masquerading, no default route, only a route to the service range, whose packets
	// the harness DNATs to 127.0.0.1 or refuses (realnode_expose.go).
	RealNodePodCIDR = "10.88.0.0/16"
	realNodeGateway = "10.88.0.1"
)

var (
	containerdRoot   = filepath.Join(realNodeLib, "containerd")
	kubeletRoot      = filepath.Join(realNodeLib, "kubelet")
	podLogsDir       = filepath.Join(realNodeLib, "pods")
	ipamDir          = filepath.Join(realNodeLib, "ipam")
	containerdState  = filepath.Join(realNodeRun, "containerd")
	containerdSocket = filepath.Join(realNodeRun, "containerd.sock")
	runcRoot         = filepath.Join(realNodeRun, "runc")
	cniConfDir       = filepath.Join(realNodeRun, "net.d")
	registryHostsDir = filepath.Join(realNodeRun, "certs.d") // containerd's registry config_path
	recordFile       = filepath.Join(realNodeRun, "node.json")
)

// containerdConfig is containerd 1.6's config (version 2) for the node.
func containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# containerd and every shim it starts live in this cgroup: a crash leaves nothing running
# outside the harness's cgroup tree.
[cgroup]
  path = %[3]q
[grpc]
  address = %[4]q
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]q   # pulled from the node's registry like every image
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    # Root here may lack CAP_SYS_RESOURCE: writing a sandbox's oom_score_adj (-998) then
    # fails and every RunPodSandbox dies with runc "can't get final child's PID from pipe:
    # EOF". Clamp oom_score_adj to containerd's own value instead.
    restrict_oom_score_adj = true
    # Pod network namespaces under our state dir, not the shared /run/netns.
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false   # cgroupfs, as the kubelet (containerd 1.6 cannot tell it)
          Root = %[6]q
    # Where containerd finds how to reach each registry host: only _default/hosts.toml
    # is there, and it sends every host to the node's registry (see hostsTOML).
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = %[9]q
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"   # Debian's containernetworking-plugins
      conf_dir = %[7]q         # our own: never /etc/cni/net.d, which a system runtime reads
  [plugins."io.containerd.internal.v1.opt"]
    path = %[8]q
`, containerdRoot, containerdState, realNodeCgroup+"/runtime", containerdSocket, SandboxImage, runcRoot,
		cniConfDir, filepath.Join(containerdRoot, "opt"), registryHostsDir)
}

// hostsTOML is containerd's _default/hosts.toml: used for every registry host that has
// no folder of its own (none has), it makes the node's registry the server of every
// host. A server replaces the host's own address (there is no fallback to it), so a pull
// of docker.io/library/nginx, quay.io/... or 127.0.0.1:1/... goes to 127.0.0.1:PORT as a
// mirror request (?ns=docker.io) and never resolves or dials anything else.
//
// The [host] table is there for containerd 1.6: its parser refuses a file without one
// ("invalid `host` tree") and then falls back to the host's own address, which would
// leave the machine. A failed pull therefore asks the registry twice.
func hostsTOML(registry string) string {
	return fmt.Sprintf(`# Every registry host is this machine's image registry: no pull leaves the machine.
server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
`, registry)
}

// cniConflist is a bridge network: cni0 is the gateway (10.88.0.1) so the kubelet's probes
// reach pods from the host; ipMasq off and the only IPAM route is to the service range
// via the gateway (the `kubernetes` Service, DNATed to the apiserver), so pods have no
// way out.
func cniConflist() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %[1]q,
  "plugins": [
    {"type": "bridge", "bridge": %[2]q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %[3]q, "gateway": %[4]q}]], "dataDir": %[5]q,
              "routes": [{"dst": %[6]q}]}}
  ]
}
`, realNodeNetwork, RealNodeBridge, RealNodePodCIDR, realNodeGateway, ipamDir, serviceCIDR)
}

// kubeletConfig is the KubeletConfiguration; the kubelet's API and healthz listen on
// 127.0.0.1 only, on ports picked free at start.
func kubeletConfig(port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false              # 1.35+ refuses cgroup v1 unless told
cgroupDriver: cgroupfs           # containerd 1.6 lacks the RuntimeConfig CRI call
cgroupRoot: %[1]s
containerRuntimeEndpoint: unix://%[2]s
address: 127.0.0.1
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]d
# Requests to the kubelet API are checked by the apiserver (TokenReview and
# SubjectAccessReview with the kubelet's own admin credential); no anonymous access.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
authorization: {mode: Webhook}
registerWithTaints: [{key: %[5]s, value: "true", effect: NoSchedule}]
# The disk may be small and nearly full: evict only when really out of room.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
# Never garbage-collect images: they were imported and cannot be pulled again.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
resolvConf: /etc/resolv.conf
podLogsDir: %[6]s
maxPods: 110
serializeImagePulls: false
syncFrequency: 10s
nodeStatusUpdateFrequency: 10s
`, realNodeCgroup, containerdSocket, port, healthzPort, RealNodeLabel, podLogsDir)
}
