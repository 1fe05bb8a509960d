package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Upstream sends packets to user space with nftables' queue expression
// (CONFIG_NFT_QUEUE). A kernel without it refuses upstream's whole table (netlink:
// ENOENT) and nothing is ever judged. There the same packets are sent to the same NFQUEUE
// with the xtables NFQUEUE target instead (iptables, through nft_compat:
// CONFIG_NFT_COMPAT and CONFIG_NETFILTER_XT_TARGET_NFQUEUE), in a chain of the mangle
// table's POSTROUTING holding upstream's rules in upstream's order:
//
//	skuid 0                       -> RETURN  (the node's root processes: the kubelet's probes)
//	ct state established,related  -> RETURN
//	saddr <pod>, daddr <pod>      -> NFQUEUE (each IPv4 address of the node's pods that some
//	                                          NetworkPolicy selects: upstream's set)
//
// Only how packets reach the queue differs; upstream's controller judges them.

// nftQueueSupported creates and deletes a table whose one rule queues, to learn whether
// the kernel has nftables' queue expression.
func nftQueueSupported() (bool, error) {
	nft, err := nftables.New()
	if err != nil {
		return false, err
	}
	t := nft.AddTable(&nftables.Table{Name: "sp-harness-netpol-probe", Family: nftables.TableFamilyINet})
	c := nft.AddChain(&nftables.Chain{Name: "probe", Table: t})
	nft.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: []expr.Any{&expr.Queue{Num: 65000, Flag: expr.QueueFlagBypass}}})
	err = nft.Flush()
	nft.DelTable(t)
	_ = nft.Flush()
	return err == nil, nil
}

// steering keeps the iptables chain in step with the policies and the node's pods.
type steering struct {
	chain, node string
	queue       int
	pods        corelisters.PodLister
	policies    networkinglisters.NetworkPolicyLister
	kick        chan struct{}
	last        string
}

func newSteering(f informers.SharedInformerFactory, chain, node string, queue int) *steering {
	s := &steering{chain: chain, node: node, queue: queue, kick: make(chan struct{}, 1),
		pods: f.Core().V1().Pods().Lister(), policies: f.Networking().V1().NetworkPolicies().Lister()}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(h)
	_, _ = f.Networking().V1().NetworkPolicies().Informer().AddEventHandler(h)
	return s
}

func (s *steering) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// podIPs are upstream's set: the IPv4 addresses of this node's pods selected by some
// NetworkPolicy (getLocalPodsForNetworkPolicy), sorted.
func (s *steering) podIPs() ([]string, error) {
	pols, err := s.policies.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, np := range pols {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			continue
		}
		pods, err := s.pods.Pods(np.Namespace).List(sel)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if p.Spec.NodeName != s.node || p.Spec.HostNetwork {
				continue
			}
			for _, ip := range p.Status.PodIPs {
				if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is4() {
					set[a.String()] = true
				}
			}
		}
	}
	var ips []string
	for ip := range set {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	return ips, nil
}

// rules is the chain's content for ips, as iptables-restore reads it.
func (s *steering) rules(ips []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*mangle\n:%s - [0:0]\n", s.chain)
	fmt.Fprintf(&b, "-A %s -m owner --uid-owner 0 -j RETURN\n", s.chain)
	fmt.Fprintf(&b, "-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\n", s.chain)
	for _, ip := range ips {
		fmt.Fprintf(&b, "-A %s -s %s/32 -j NFQUEUE --queue-num %d\n", s.chain, ip, s.queue)
		fmt.Fprintf(&b, "-A %s -d %s/32 -j NFQUEUE --queue-num %d\n", s.chain, ip, s.queue)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// run writes the chain (replaced in one iptables-restore, so it is never half there),
// hooks it into POSTROUTING, and rewrites it on every change until ctx ends; then it
// removes both.
func (s *steering) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	defer func() {
		if err := removeChain(s.chain); err != nil {
			logger.Error(err, "removing the steering chain")
		}
	}()
	for {
		if err := s.sync(ctx); err != nil {
			logger.Error(err, "steering packets to NFQUEUE")
			select { // try again soon even without a change
			case s.kick <- struct{}{}:
			default:
			}
			time.Sleep(time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
	}
}

func (s *steering) sync(ctx context.Context) error {
	ips, err := s.podIPs()
	if err != nil {
		return err
	}
	text := s.rules(ips)
	if text == s.last {
		return nil
	}
	cmd := exec.CommandContext(ctx, "iptables-restore", "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %v: %s", err, out)
	}
	if iptables("-C", "POSTROUTING", "-j", s.chain) != nil {
		if err := iptables("-I", "POSTROUTING", "1", "-j", s.chain); err != nil {
			return err
		}
	}
	s.last = text
	klog.FromContext(ctx).Info("steering to NFQUEUE", "chain", "mangle "+s.chain, "queue", s.queue, "pods", ips)
	return nil
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "5", "-t", "mangle"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables -t mangle %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// removeChain deletes the jump and the chain; a chain that is not there is fine.
func removeChain(chain string) error {
	if exec.Command("iptables", "-w", "5", "-t", "mangle", "-S", chain).Run() != nil {
		return nil
	}
	for iptables("-D", "POSTROUTING", "-j", chain) == nil {
	}
	return errors.Join(iptables("-F", chain), iptables("-X", chain))
}

// chainPodIPs are the pod addresses the chain queues.
func chainPodIPs(chain string) ([]string, error) {
	out, err := exec.Command("iptables", "-w", "5", "-t", "mangle", "-S", chain).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("iptables -t mangle -S %s: %v: %s", chain, err, bytes.TrimSpace(out))
	}
	var ips []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[2] == "-s" && strings.Contains(l, "-j NFQUEUE") {
			ips = append(ips, strings.TrimSuffix(f[3], "/32"))
		}
	}
	return ips, nil
}
