package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// The real node enforces NetworkPolicy: sigs.k8s.io/kube-network-policies (the SIG
// Network implementation kind ships; tools/kube-network-policies), built from the Go
// module proxy like the other parts and run beside the kubelet as a process, by PID, with
// the harness kubeconfig and the node's name. Without it the bridge forwards everything,
// and a policy is only an object in etcd.
//
// How it filters (v0.8.0): one nftables table (inet, netpolTable) whose only filtering
// chain is on the postrouting hook; on a kernel without nftables' queue expression
// (CONFIG_NFT_QUEUE), as this machine's, the same rules as an iptables chain
// (netpolChain, from mangle POSTROUTING) with the xtables NFQUEUE target. Packets from or
// to the IP of a pod of this node that some NetworkPolicy selects go to NFQUEUE
// netpolQueue, where the first packet of each connection is judged against the policies
// in user space and accepted or dropped (no answer: a refused connection times out);
// established connections and packets from local sockets of uid 0 (the kubelet's probes,
// and the harness's own processes, which run as root) are accepted without asking. So:
//   - pod to pod on the bridge is filtered, once net.bridge.bridge-nf-call-iptables=1
//     makes bridged IPv4 frames pass netfilter's hooks (br_netfilter; the harness sets
//     it and restores the host's value on stop);
//   - pod to its own node (INPUT: the bridge's 10.88.0.1, and so every port given to
//     ExposeToPods and the apiserver behind the kubernetes Service, which the harness
//     DNATs to 127.0.0.1) is never filtered: such packets never reach postrouting. In
//     this world NATS and DCM's registry run on the node; tests that need them behind a
//     policy reach them through pods (see tools/devenv/e2e/deploy).
//
// What the kernel must have: nfnetlink_queue (NFQUEUE), conntrack, br_netfilter
// (/proc/sys/net/bridge), and either nftables' queue expression (CONFIG_NFT_QUEUE:
// upstream's own table) or the xtables NFQUEUE target with nft_compat or legacy iptables
// (CONFIG_NETFILTER_XT_TARGET_NFQUEUE, and the owner and conntrack matches). This
// machine's 6.18 has everything built in but CONFIG_NFT_QUEUE.

const (
	// netpolTable is the enforcer's nftables table (family inet), a harness-owned name:
	// the clean-up deletes it by name after a crash.
	netpolTable = "sp-harness-netpol"
	// netpolChain is the mangle chain (from POSTROUTING) through which the enforcer
	// steers packets to its NFQUEUE on a kernel without nftables' queue expression
	// (tools/kube-network-policies/steer.go), as this machine's.
	netpolChain = "SP-HARNESS-NETPOL"
	// netpolQueue is its NFQUEUE number.
	netpolQueue = 100
	// bridgeNFCallIPTables makes bridged IPv4 traffic pass the inet hooks.
	bridgeNFCallIPTables = "net.bridge.bridge-nf-call-iptables"
)

// NetworkPolicySupported says why NetworkPolicy cannot be enforced on this machine's real
// node, or nil when it can.
func NetworkPolicySupported() error {
	if _, err := os.Stat(sysctlPath(bridgeNFCallIPTables)); err != nil {
		return fmt.Errorf("no %s (br_netfilter, CONFIG_BRIDGE_NETFILTER, not loaded): pod-to-pod traffic on the node's bridge never reaches netfilter, so nothing can filter it", sysctlPath(bridgeNFCallIPTables))
	}
	if _, err := os.Stat("/proc/net/netfilter/nfnetlink_queue"); err != nil {
		return errors.New("no /proc/net/netfilter/nfnetlink_queue (nfnetlink_queue, CONFIG_NETFILTER_NETLINK_QUEUE, not loaded): kube-network-policies judges connections through NFQUEUE")
	}
	if _, err := os.Stat("/var/run/nri/nri.sock"); err == nil {
		return errors.New("/var/run/nri/nri.sock exists (another container runtime on this machine): kube-network-policies would register with it as an NRI plugin")
	}
	return nil
}

// EnforcesNetworkPolicy is nil when the node's NetworkPolicy enforcer runs, else why not
// (the reason tests that need it skip with).
func (n *RealNode) EnforcesNetworkPolicy() error {
	n.reload()
	if n.rec.NetworkPolicies == nil {
		if n.rec.NetworkPoliciesUnavailable != "" {
			return errors.New(n.rec.NetworkPoliciesUnavailable)
		}
		return errors.New("the real node was started without a NetworkPolicy enforcer (an older harness?)")
	}
	if !n.rec.NetworkPolicies.running() {
		return fmt.Errorf("kube-network-policies (PID %d) is not running; its log: %s", n.rec.NetworkPolicies.PID, n.NetworkPolicyLog())
	}
	return nil
}

// NetworkPolicyLog is the enforcer's log (-v=2: one line per judged connection).
func (n *RealNode) NetworkPolicyLog() string {
	return filepath.Join(n.Dir, "kube-network-policies.log")
}

// NetworkPolicyPodIPs are the IPv4 addresses of the node's pods the enforcer filters
// (its set of pods some NetworkPolicy selects): once a pod's address is there, the
// enforcer knows the pod and every policy selecting it, and judges its connections.
func (n *RealNode) NetworkPolicyPodIPs(ctx context.Context) ([]string, error) {
	if err := n.EnforcesNetworkPolicy(); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, n.rec.NetworkPolicies.Bin, "-list-pod-ips", "-table", netpolTable, "-iptables-chain", netpolChain).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("kube-network-policies -list-pod-ips: %v: %s", err, out)
	}
	return strings.Fields(string(out)), nil
}

// startNetworkPolicies starts the enforcer for the node and waits until its table is in
// place and it holds its NFQUEUE. Where the machine cannot (NetworkPolicySupported), the
// node runs without it and the record says why.
func (n *RealNode) startNetworkPolicies(ctx context.Context, bin string) error {
	if err := NetworkPolicySupported(); err != nil {
		n.rec.NetworkPoliciesUnavailable = "NetworkPolicy is not enforced on this machine's real node: " + err.Error()
		fmt.Fprintf(n.out, "harness: %s\n", n.rec.NetworkPoliciesUnavailable)
		return n.save()
	}
	// The host's value is in rec.Host.Sysctls (recordHost), restored by the clean-up.
	if err := os.WriteFile(sysctlPath(bridgeNFCallIPTables), []byte("1"), 0o644); err != nil {
		return fmt.Errorf("setting %s=1: %w", bridgeNFCallIPTables, err)
	}
	ports, err := proc.FreePorts(1)
	if err != nil {
		return err
	}
	start := time.Now()
	p, err := startProcess("kube-network-policies", bin, []string{
		"-kubeconfig=" + n.Kubeconfig,
		"-hostname-override=" + RealNodeName,
		"-metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"-table=" + netpolTable,
		"-iptables-chain=" + netpolChain,
		"-nfqueue-id=" + strconv.Itoa(netpolQueue),
		"-v=2",
	}, n.Dir, n.rec.Detached, sbinPath())
	if err != nil {
		return err
	}
	n.rec.NetworkPolicies = p
	if err := n.save(); err != nil {
		return err
	}
	if err := waitFor("kube-network-policies (its table and NFQUEUE)", time.Minute, []*process{p}, func() error {
		if out, err := exec.CommandContext(ctx, bin, "-list-pod-ips", "-table", netpolTable, "-iptables-chain", netpolChain).CombinedOutput(); err != nil {
			return fmt.Errorf("its rules: %v: %s", err, out)
		}
		if !queueBound(netpolQueue) {
			return fmt.Errorf("NFQUEUE %d not bound yet", netpolQueue)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(n.out, "harness: NetworkPolicy enforced on %s by kube-network-policies %s (PID %d, nftables table inet %s, NFQUEUE %d; log %s) in %s\n",
		RealNodeName, KubeNetworkPoliciesVersion, p.PID, netpolTable, netpolQueue, n.NetworkPolicyLog(), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// queueBound says whether a process holds NFQUEUE q (/proc/net/netfilter/nfnetlink_queue
// lists bound queues, the number first).
func queueBound(q int) bool {
	f, err := os.Open("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 0 && fs[0] == strconv.Itoa(q) {
			return true
		}
	}
	return false
}

// removeNetworkPolicies stops the enforcer (on SIGTERM it deletes its table itself) and
// deletes the table if it is still there (after a crash), with the recorded binary or
// the cached one.
func removeNetworkPolicies(rec *realNodeRecord) error {
	bin := ""
	if rec != nil && rec.NetworkPolicies != nil {
		rec.NetworkPolicies.stop(10 * time.Second)
		bin = rec.NetworkPolicies.Bin
	}
	if bin == "" { // no record: any build of ours in the cache knows how
		cache, err := CacheDir()
		if err != nil {
			return nil
		}
		bins, _ := filepath.Glob(filepath.Join(cache, "bin", netpolModule+"-*", netpolModule))
		if len(bins) == 0 {
			return nil // never built here, so never run
		}
		bin = bins[0]
	}
	var errs []error
	if chains, err := iptablesChains("iptables", "mangle"); err == nil && slices.Contains(chains, netpolChain) {
		errs = append(errs, removeChains("iptables", "mangle", map[string]bool{netpolChain: true}))
	}
	if _, err := os.Stat(bin); err != nil {
		return errors.Join(errs...)
	}
	if out, err := exec.Command(bin, "-delete-table", "-table", netpolTable, "-iptables-chain", netpolChain).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("deleting nftables table inet %s: %v: %s", netpolTable, err, out))
	}
	return errors.Join(errs...)
}
