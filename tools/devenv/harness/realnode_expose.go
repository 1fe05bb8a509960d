package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the node's pods reach, on this machine only. Pods sit on the bridge with a route to
// the service range and nothing else (no default route, no masquerading): the harness
// DNATs, for packets arriving on the bridge, the `kubernetes` Service's address
// (10.96.0.1:443) to the apiserver on 127.0.0.1, and each port given to ExposeToPods
// (10.88.0.1:PORT) to 127.0.0.1:PORT. So a pod gets its in-cluster config from the
// service account as in a real cluster, and the harness's NATS and DCM registry, which
// listen on 127.0.0.1 only, become reachable from pods without binding anything else.
//
// DNAT to 127.0.0.1 needs net.ipv4.conf.cni0.route_localnet=1 (else the kernel drops the
// packets as martians, and refuses to route the replies, whose source is 127.0.0.1, out of
// the bridge), so the harness creates the bridge itself before any pod (the bridge plugin
// takes an existing bridge that already has the gateway address) and sets it on that
// bridge only. route_localnet would also let a pod that crafts packets (CAP_NET_RAW is in
// the default capabilities) reach every 127.0.0.1 service through the bridge, so a filter
// rule drops what arrives from the bridge for 127.0.0.0/8 unless one of our DNAT rules
// sent it there. The kubelet (1.37) adds the same guard for every interface (its
// KUBE-FIREWALL chain, first in INPUT, so it is the one that fires today); ours does not
// depend on it, as upstream has been moving that rule to kube-proxy, which is not here. The route to the service range would let a pod's
// packets for any other service address be forwarded out of the machine (the bridge
// plugin turns net.ipv4.ip_forward on): forwarding from the bridge to anywhere else is
// refused with "network unreachable".
//
// Everything is recorded in the node's record (podNetwork) and removed by Stop and the
// clean-up after a crash: the chains by their fixed names, the bridge with its sysctl.

const (
	// podExposeChain is the harness's chain in the nat table (jumped to from PREROUTING
	// for packets from the bridge: the DNATs) and in the filter table (from INPUT: only
	// DNATed packets may reach 127.0.0.0/8).
	podExposeChain = "SP-HARNESS-EXPOSE"
	// podForwardChain (filter, from FORWARD for packets from the bridge to elsewhere):
	// nothing a pod sends is routed off the bridge.
	podForwardChain = "SP-HARNESS-NOFORWARD"
	// serviceCIDR is the apiserver's --service-cluster-ip-range: the pods' only route.
	serviceCIDR = "10.96.0.0/16"
)

// podNetworkJumps are the rules that send packets to the harness's chains: "table chain
// rule...". They are inserted first in their chain so a host firewall's own rules (an
// INPUT policy of DROP) do not hide ours.
var podNetworkJumps = [][]string{
	{"nat", "PREROUTING", "-i", RealNodeBridge, "-j", podExposeChain},
	{"filter", "INPUT", "-i", RealNodeBridge, "-j", podExposeChain},
	{"filter", "FORWARD", "-i", RealNodeBridge, "!", "-o", RealNodeBridge, "-j", podForwardChain},
}

// podNetworkChains are the harness's chains, "table chain".
var podNetworkChains = [][2]string{{"nat", podExposeChain}, {"filter", podExposeChain}, {"filter", podForwardChain}}

// podNetwork is what the harness changed on the host so pods reach the machine, in the
// node's record.
type podNetwork struct {
	// Bridge: the harness created RealNodeBridge (the clean-up deletes it anyway).
	Bridge bool `json:"bridge"`
	// Sysctls set on the bridge (net.ipv4.conf.cni0.route_localnet=1): they go with the
	// bridge; the clean-up resets them first in case deleting it fails.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// Chains ("table chain") and Jumps ("table chain rule...") the harness added.
	Chains []string   `json:"chains,omitempty"`
	Jumps  [][]string `json:"jumps,omitempty"`
	// APIServer is the DNAT of the `kubernetes` Service: "10.96.0.1:443 -> 127.0.0.1:PORT".
	APIServer string `json:"apiServer,omitempty"`
	// Exposed are the ports ExposeToPods made reachable at 10.88.0.1:PORT.
	Exposed []int `json:"exposed,omitempty"`
}

// setupPodNetwork creates the bridge, sets route_localnet on it, makes the harness's chains
// with their guards and DNATs the `kubernetes` Service to the apiserver. The record is
// saved before each change, so a crash at any point is cleaned up.
func (n *RealNode) setupPodNetwork(ctx context.Context) error {
	svcIP, svcPort, apiPort, err := n.apiServerAddrs(ctx)
	if err != nil {
		return err
	}
	pn := &n.rec.PodNetwork
	pn.Bridge = true
	for _, c := range podNetworkChains {
		pn.Chains = append(pn.Chains, c[0]+" "+c[1])
	}
	pn.Jumps = podNetworkJumps
	routeLocalnet := "net.ipv4.conf." + RealNodeBridge + ".route_localnet"
	pn.Sysctls = map[string]string{routeLocalnet: "1"}
	if err := n.save(); err != nil {
		return err
	}
	ip, err := findCmd("ip")
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "add", RealNodeBridge, "type", "bridge"},
		// The bridge plugin's own address for the gateway: it then keeps the bridge as is.
		{"addr", "add", realNodeGateway + "/16", "dev", RealNodeBridge},
		{"link", "set", RealNodeBridge, "up"},
	} {
		if out, err := runCmd(ip, args...); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.WriteFile(sysctlPath(routeLocalnet), []byte("1"), 0o644); err != nil {
		return fmt.Errorf("setting %s: %w", routeLocalnet, err)
	}
	for _, c := range podNetworkChains {
		if out, err := iptables("iptables", c[0], "-N", c[1]).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables -t %s -N %s: %v: %s", c[0], c[1], err, out)
		}
	}
	rules := [][]string{
		// Loopback addresses from the bridge: only what our DNATs sent there.
		{"filter", podExposeChain, "-d", "127.0.0.0/8", "-m", "conntrack", "--ctstate", "DNAT", "-j", "ACCEPT"},
		{"filter", podExposeChain, "-d", "127.0.0.0/8", "-j", "DROP"},
		{"filter", podForwardChain, "-j", "REJECT", "--reject-with", "icmp-net-unreachable"},
		{"nat", podExposeChain, "-d", svcIP + "/32", "-p", "tcp", "--dport", strconv.Itoa(svcPort),
			"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(apiPort)},
	}
	for _, r := range rules {
		if err := ensureRule("-A", r[0], r[1], r[2:]...); err != nil {
			return err
		}
	}
	// The jumps last: until now the chains were not in the path.
	for _, j := range podNetworkJumps {
		if err := ensureRule("-I", j[0], j[1], j[2:]...); err != nil {
			return err
		}
	}
	pn.APIServer = fmt.Sprintf("%s:%d -> 127.0.0.1:%d", svcIP, svcPort, apiPort)
	return n.save()
}

// apiServerAddrs are the `kubernetes` Service's ClusterIP and port (what the kubelet puts
// in KUBERNETES_SERVICE_HOST/PORT) and the apiserver's port on 127.0.0.1.
func (n *RealNode) apiServerAddrs(ctx context.Context) (svcIP string, svcPort, apiPort int, err error) {
	cfg, err := (&Cluster{Kubeconfig: n.Kubeconfig}).RESTConfig()
	if err != nil {
		return "", 0, 0, err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", 0, 0, err
	}
	if u.Hostname() != "127.0.0.1" {
		return "", 0, 0, fmt.Errorf("the apiserver is at %s, not on 127.0.0.1: pods could not reach it through the kubernetes Service", cfg.Host)
	}
	if apiPort, err = strconv.Atoi(u.Port()); err != nil {
		return "", 0, 0, fmt.Errorf("the apiserver's address %s has no port", cfg.Host)
	}
	cs, err := n.client()
	if err != nil {
		return "", 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The apiserver makes the Service soon after it starts.
	for {
		svc, gerr := cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if gerr == nil && svc.Spec.ClusterIP != "" && len(svc.Spec.Ports) > 0 {
			return svc.Spec.ClusterIP, int(svc.Spec.Ports[0].Port), apiPort, nil
		}
		select {
		case <-ctx.Done():
			return "", 0, 0, errors.Join(errors.New("the kubernetes Service in default has no ClusterIP and port"), gerr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ExposeToPods makes 127.0.0.1:port on this machine reachable from the real node's pods
// at 10.88.0.1:port (the bridge's address, which they reach directly) and returns that
// address, e.g. for the harness's NATS ("nats://" + addr) or DCM's registry. Nothing is
// bound to another address: packets from the bridge for 10.88.0.1:port are DNATed to
// 127.0.0.1:port, and the replies un-NATed by conntrack. Any process may call it on the
// machine's node (LoadRealNode), more than once; the exposure lasts until
// UnexposeFromPods or the node stops.
func (n *RealNode) ExposeToPods(port int) (addr string, err error) {
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("ExposeToPods: port %d out of range", port)
	}
	unlock, err := lockRealNode()
	if err != nil {
		return "", err
	}
	defer unlock()
	n.reload()
	if len(n.rec.runningPIDs()) == 0 {
		return "", fmt.Errorf("ExposeToPods: the real node of %s is not running", n.Dir)
	}
	if n.rec.PodNetwork.APIServer == "" {
		return "", errors.New("ExposeToPods: the real node was started without the pod network (an older harness?): restart it")
	}
	if err := ensureRule("-A", "nat", podExposeChain, exposeRule(port)...); err != nil {
		return "", err
	}
	if !slices.Contains(n.rec.PodNetwork.Exposed, port) {
		n.rec.PodNetwork.Exposed = append(n.rec.PodNetwork.Exposed, port)
		if err := n.save(); err != nil {
			return "", err
		}
	}
	return net.JoinHostPort(realNodeGateway, strconv.Itoa(port)), nil
}

// UnexposeFromPods undoes ExposeToPods(port); a port not exposed is fine.
func (n *RealNode) UnexposeFromPods(port int) error {
	unlock, err := lockRealNode()
	if err != nil {
		return err
	}
	defer unlock()
	n.reload()
	deleteRule("nat", podExposeChain, exposeRule(port)...)
	if i := slices.Index(n.rec.PodNetwork.Exposed, port); i >= 0 {
		n.rec.PodNetwork.Exposed = slices.Delete(n.rec.PodNetwork.Exposed, i, i+1)
		return n.save()
	}
	return nil
}

func exposeRule(port int) []string {
	p := strconv.Itoa(port)
	return []string{"-d", realNodeGateway + "/32", "-p", "tcp", "--dport", p, "-j", "DNAT", "--to-destination", "127.0.0.1:" + p}
}

// ensureRule adds a rule (-A: appended, -I: inserted first) unless it is there already
// (-C), so several processes may ask for the same one.
func ensureRule(how, table, chain string, rule ...string) error {
	if iptables("iptables", table, append([]string{"-C", chain}, rule...)...).Run() == nil {
		return nil
	}
	if out, err := iptables("iptables", table, append([]string{how, chain}, rule...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -t %s %s %s %s: %v: %s", table, how, chain, strings.Join(rule, " "), err, out)
	}
	return nil
}

// deleteRule deletes every copy of a rule.
func deleteRule(table, chain string, rule ...string) {
	for range 10 {
		if iptables("iptables", table, append([]string{"-D", chain}, rule...)...).Run() != nil {
			return
		}
	}
}

// removePodNetwork removes the harness's chains and the jumps to them (by their fixed
// names, with or without a record: nothing else uses them) and, when the record says the
// bridge got route_localnet, turns it off in case the bridge outlives the clean-up.
func removePodNetwork(rec *realNodeRecord) error {
	if rec != nil {
		for name := range rec.PodNetwork.Sysctls {
			if _, err := os.Stat(sysctlPath(name)); err == nil {
				_ = os.WriteFile(sysctlPath(name), []byte("0"), 0o644)
			}
		}
	}
	jumps := podNetworkJumps
	if rec != nil {
		jumps = append(slices.Clone(jumps), rec.PodNetwork.Jumps...)
	}
	for _, j := range jumps {
		deleteRule(j[0], j[1], j[2:]...)
	}
	var errs []error
	for _, c := range podNetworkChains {
		if chains, err := iptablesChains("iptables", c[0]); err != nil || !slices.Contains(chains, c[1]) {
			continue
		}
		// A jump written some other way (by hand) would keep the chain busy.
		if err := removeChains("iptables", c[0], map[string]bool{c[1]: true}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runCmd runs a command, returning its combined output.
func runCmd(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
