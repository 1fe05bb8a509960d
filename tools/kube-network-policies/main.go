// Command kube-network-policies runs sigs.k8s.io/kube-network-policies (the SIG Network
// NetworkPolicy implementation kind ships), pinned in this module's go.mod, for the test
// harness's real node. It is upstream's cmd/main.go with what a process beside the
// kubelet needs instead of a DaemonSet pod: the cluster from -kubeconfig (upstream reads
// only the in-cluster service account), SIGTERM as well as SIGINT removing its nftables
// table, the table and the metrics address chosen by the harness, and two one-shot modes
// the harness uses without an nft binary: -list-pod-ips (the pods it filters) and
// -delete-table (clean-up after a crash). Where the kernel lacks nftables' queue
// expression, packets reach the same queue through an iptables chain (steer.go).
//
// How it filters (v0.8.0, pkg/networkpolicy/controller.go): one nftables table (family
// inet) with a filter chain on the postrouting hook (priority srcnat-5) that accepts
// established and related packets and packets from local sockets of uid 0 (the kubelet's
// probes), and queues (NFQUEUE) every other packet from or to an IP in its set of local
// pods selected by some NetworkPolicy; the first packet of each connection is judged in
// user space against the policies and accepted or dropped. Packets to a local address
// (INPUT) never pass postrouting: what a pod sends to its own node is not filtered.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() { os.Exit(run()) }

func run() int {
	var (
		kubeconfig    = flag.String("kubeconfig", "", "the cluster's kubeconfig (required)")
		hostname      = flag.String("hostname-override", "", "the Node's name (required): only its pods are filtered")
		metricsAddr   = flag.String("metrics-bind-address", "127.0.0.1:0", "host:port of the metrics server")
		queueID       = flag.Int("nfqueue-id", 100, "the NFQUEUE number")
		table         = flag.String("table", "kube-network-policies", "the nftables table (family inet)")
		chain         = flag.String("iptables-chain", "KUBE-NETWORK-POLICIES", "the mangle chain steering packets to the NFQUEUE where the kernel lacks nftables' queue expression (steer.go)")
		bug1766       = flag.Bool("netfilter-bug-1766-fix", false, "judge DNS packets in prerouting (only kernels before 6.12 need it)")
		listPodIPs    = flag.Bool("list-pod-ips", false, "print the IPv4 addresses of the pods it filters (the table's set, or the steering chain's), one a line, and exit")
		deleteTable   = flag.Bool("delete-table", false, "delete the table and the steering chain if they exist, and exit")
		loggingConfig = logsapi.NewLoggingConfiguration()
	)
	logsapi.AddGoFlags(loggingConfig, flag.CommandLine)
	flag.Parse()
	logs.InitLogs()
	if err := logsapi.ValidateAndApply(loggingConfig, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch {
	case *listPodIPs:
		return printPodIPs(*table, *chain)
	case *deleteTable:
		return removeTable(*table, *chain)
	}
	if *kubeconfig == "" || *hostname == "" {
		fmt.Fprintln(os.Stderr, "kube-network-policies: -kubeconfig and -hostname-override are required")
		return 2
	}
	if _, _, err := net.SplitHostPort(*metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "kube-network-policies: -metrics-bind-address:", err)
		return 2
	}
	// Upstream registers as an NRI plugin with the runtime at /var/run/nri/nri.sock to learn
	// pod IPs early. The harness's containerd (1.6) has no NRI; a socket there belongs to
	// another runtime on this machine, which this process must never talk to.
	if _, err := os.Stat("/var/run/nri/nri.sock"); err == nil {
		fmt.Fprintln(os.Stderr, "kube-network-policies: /var/run/nri/nri.sock exists (another container runtime on this machine): refusing to register with it")
		return 1
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger := klog.FromContext(ctx)

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		logger.Error(err, "kubeconfig")
		return 1
	}
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.ContentType = "application/vnd.kubernetes.protobuf"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		logger.Error(err, "client")
		return 1
	}
	informersFactory := informers.NewSharedInformerFactory(clientset, 0)

	ln, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		logger.Error(err, "metrics listener")
		return 1
	}
	logger.Info("metrics", "address", ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	go func() { utilruntime.HandleError(http.Serve(ln, mux)) }()

	controller, err := networkpolicy.NewController(clientset,
		informersFactory.Networking().V1().NetworkPolicies(),
		informersFactory.Core().V1().Namespaces(),
		informersFactory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID:             *queueID,
			NodeName:            *hostname,
			NetfilterBug1766Fix: *bug1766,
			NFTableName:         *table,
		})
	if err != nil {
		logger.Error(err, "can not start the network policy controller")
		return 1
	}
	nftQueue, err := nftQueueSupported()
	if err != nil {
		logger.Error(err, "nftables")
		return 1
	}
	steered := make(chan struct{})
	if nftQueue {
		close(steered)
	} else {
		logger.Info("this kernel has no nftables queue expression (CONFIG_NFT_QUEUE): upstream's table cannot be loaded, "+
			"so packets are steered to the NFQUEUE with the xtables NFQUEUE target (iptables, nft_compat) instead", "chain", "mangle "+*chain)
		s := newSteering(informersFactory, *chain, *hostname, *queueID)
		go func() { defer close(steered); s.run(ctx) }()
	}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx) }()
	informersFactory.Start(ctx.Done())
	code := 0
	select {
	case err := <-done: // Run returns early only when it failed (nfqueue)
		cancel()
		if err != nil {
			logger.Error(err, "the network policy controller stopped")
			code = 1
		}
	case <-ctx.Done():
		// Run removes its table once ctx is done; give it the time upstream gives it.
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	<-steered // the steering chain removed
	return code
}

// printPodIPs prints the pods upstream's set holds or, where the steering chain is in
// use, the pods it queues.
func printPodIPs(table, chain string) int {
	nft, err := nftables.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	t, err := nft.ListTableOfFamily(table, nftables.TableFamilyINet)
	if err != nil {
		ips, cerr := chainPodIPs(chain)
		if cerr != nil {
			fmt.Fprintf(os.Stderr, "neither table inet %s (%v) nor chain mangle %s (%v)\n", table, err, chain, cerr)
			return 1
		}
		for _, ip := range ips {
			fmt.Println(ip)
		}
		return 0
	}
	set, err := nft.GetSetByName(t, "podips-v4")
	if err != nil {
		fmt.Fprintf(os.Stderr, "set podips-v4 of table inet %s: %v\n", table, err)
		return 1
	}
	elems, err := nft.GetSetElements(set)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, e := range elems {
		fmt.Println(net.IP(e.Key).String())
	}
	return 0
}

// removeTable deletes upstream's table and the steering chain, whichever is there.
func removeTable(table, chain string) int {
	if err := removeChain(chain); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nft, err := nftables.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := nft.ListTableOfFamily(table, nftables.TableFamilyINet); err != nil {
		return 0 // not there
	}
	nft.DelTable(&nftables.Table{Name: table, Family: nftables.TableFamilyINet})
	if err := nft.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "deleting table inet %s: %v\n", table, err)
		return 1
	}
	return 0
}
