package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

const (
	// ContextName names the harness cluster in its kubeconfig; tests reuse a cluster from
	// KUBECONFIG only when its current context has this name, so they never run against a
	// developer's real cluster by accident.
	ContextName = "sp-harness"
	// NodeName is the fake node kwok plays the kubelet for.
	NodeName = "kwok-node-0"
	// KwokNodeAnnotation marks the nodes kwok manages.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	stateFile          = "cluster.json"
)

// Options control how a cluster is started.
type Options struct {
	// Dir holds PKI, data, logs and the kubeconfig. Empty: a new temporary folder that
	// Stop removes.
	Dir string
	// Detached processes outlive the starting process (make cluster-up); otherwise they
	// die with it.
	Detached bool
	// Progress receives build and start-up messages. Nil: discarded.
	Progress io.Writer
	// NoEndpointControllers turns off the controller-manager's Endpoints and
	// EndpointSlice controllers (nothing the provider reads). With thousands of Services
	// and pods in one namespace they take most of a CPU and add writes for every pod
	// change: on 2 CPUs, filling 3,000 containers ran at 18/s with them and 27/s
	// without, and the gap grows with the count. The benchmark uses it.
	NoEndpointControllers bool
	// NoDefaultSpreading turns off the scheduler's default topology spreading (pods of
	// one Service or ReplicaSet spread over nodes). For every pod it lists the Services
	// of its namespace and builds each one's selector: at 5,000 containers in one
	// namespace that was 55% of the scheduler's CPU (profiled), growing with every
	// container. The benchmark uses it; which fake node a pod lands on does not matter.
	NoDefaultSpreading bool
	// Env is extra environment for every control-plane process (all Go programs). The
	// benchmark sets a lazier garbage collector (GOGC): with tens of thousands of objects
	// cached, the apiserver and the controller-manager spend a tenth of their CPU in GC.
	Env []string
	// AuditReads makes the apiserver write an audit line (user agent, verb, resource,
	// time) for every GET and LIST of Deployments, Pods and Services to AuditLogPath:
	// the apiserver's own request counter has no client label, and the benchmark needs
	// to tell who read. Nothing else is audited.
	AuditReads bool
	// Nodes is how many schedulable fake nodes kwok plays: NodeName, kwok-node-1, …
	// 0 means 1. The benchmark spreads its thousands of pods over several, as a real
	// cluster would.
	Nodes int
	// CPUs: the CPUs every control-plane process runs on (SplitCPUs); empty, any. The
	// benchmark keeps the control plane apart from the provider and its own clients, as a
	// cluster does, so that their CPU is not taken from the apiserver's.
	CPUs []int
}

// Cluster is a running control plane: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, all on 127.0.0.1.
type Cluster struct {
	Dir        string     `json:"dir"`
	Kubeconfig string     `json:"kubeconfig"`
	Server     string     `json:"server"`
	Processes  []*process `json:"processes"`
	removeDir  bool
	detached   bool
	cpus       []int
}

// Start builds what is missing, starts every component on free loopback ports and
// returns once the fake node is Ready and the default ServiceAccount exists.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	out := opts.Progress
	if out == nil {
		out = io.Discard
	}
	bins, err := EnsureBinaries(ctx, out)
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: opts.Dir, detached: opts.Detached, cpus: opts.CPUs}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "sp-harness-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	start := time.Now()
	fmt.Fprintf(out, "harness: starting control plane in %s\n", c.Dir)

	p, err := writePKI(c.Dir)
	if err != nil {
		return nil, err
	}
	token, err := randomHex(24)
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+",harness-admin,harness-admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	ports, err := proc.FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.Server = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	run := func(name, bin string, args ...string) (*process, error) {
		pr, err := c.start(name, bin, args, opts.Env)
		if err != nil {
			return nil, err
		}
		c.Processes = append(c.Processes, pr)
		return pr, c.saveState()
	}

	etcd, err := run("etcd", bins.Etcd,
		"--name=harness", "--data-dir="+filepath.Join(c.Dir, "etcd-data"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=harness="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	if err := waitFor("etcd health", 30*time.Second, []*process{etcd}, func() error {
		return httpOK(http.DefaultClient, etcdURL+"/health", "")
	}); err != nil {
		return nil, err
	}

	apiserverArgs := []string{"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert, "--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		// On top of the defaults: a namespace's annotations can give its pods a node
		// selector and tolerations, which is how RealNodeNamespace sends every pod of a
		// namespace (e.g. the service's, which sets neither) to the real node.
		"--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.SAPublic, "--service-account-signing-key-file=" + p.SAPrivate,
		"--service-cluster-ip-range=" + serviceCIDR, // the real node's pods route it (realnode_expose.go)
		// The default reconciler would publish 127.0.0.1 as the kubernetes Service's
		// endpoint, which the apiserver refuses.
		"--endpoint-reconciler-type=none",
		// sp-bench -cpu-profile reads the apiserver's CPU profile.
		"--profiling=true"}
	if opts.AuditReads {
		policy := filepath.Join(c.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditReadsPolicy), 0o600); err != nil {
			return nil, err
		}
		apiserverArgs = append(apiserverArgs, "--audit-policy-file="+policy,
			"--audit-log-path="+c.AuditLogPath(), "--audit-log-format=json", "--audit-log-mode=blocking")
	}
	apiserver, err := run("kube-apiserver", bins.APIServer, apiserverArgs...)
	if err != nil {
		return nil, err
	}
	if err := c.writeKubeconfig(p.CACert, token); err != nil {
		return nil, err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	if err := waitFor("kube-apiserver /readyz", 90*time.Second, []*process{etcd, apiserver}, func() error {
		return httpOK(httpClient, c.Server+"/readyz", token)
	}); err != nil {
		return nil, err
	}

	controllers := "--controllers=*,-nodeipam"
	if opts.NoEndpointControllers {
		controllers += ",-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller"
	}
	if _, err := run("kube-controller-manager", bins.ControllerManager,
		"--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--service-account-private-key-file="+p.SAPrivate, "--root-ca-file="+p.CACert,
		"--use-service-account-credentials=false",
		// The defaults (20 QPS, 5 workers) make the controller-manager, not the
		// apiserver, the bottleneck when tests and benchmarks create hundreds of
		// Deployments at once.
		"--kube-api-qps=300", "--kube-api-burst=600",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		// Node IPAM needs a cluster CIDR; kwok hands out pod IPs itself.
		controllers); err != nil {
		return nil, err
	}
	schedArgs := []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--kube-api-qps=300", "--kube-api-burst=600"}
	if opts.NoDefaultSpreading {
		// A config file replaces the client and leader-election flags.
		cfgPath := filepath.Join(c.Dir, "scheduler.yaml")
		if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(schedulerNoSpreading, c.Kubeconfig)), 0o644); err != nil {
			return nil, err
		}
		schedArgs = []string{"--config=" + cfgPath, "--secure-port=0"}
	}
	if _, err := run("kube-scheduler", bins.Scheduler, schedArgs...); err != nil {
		return nil, err
	}
	kwokConfig, err := writeKwokConfig(c.Dir, bins.KwokStages)
	if err != nil {
		return nil, err
	}
	if _, err := run("kwok", bins.Kwok, "--kubeconfig="+c.Kubeconfig, "--config="+kwokConfig); err != nil {
		return nil, err
	}

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nodes := []string{NodeName}
	for i := 1; i < opts.Nodes; i++ {
		nodes = append(nodes, fmt.Sprintf("kwok-node-%d", i))
	}
	for _, n := range nodes {
		if err := addNode(ctx, cs, n, false); err != nil {
			return nil, err
		}
	}
	if err := waitFor(fmt.Sprintf("%d node(s) Ready and the default ServiceAccount", len(nodes)), 60*time.Second, c.Processes, func() error {
		return clusterReady(ctx, cs, nodes)
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "harness: control plane ready in %s (API %s)\n", time.Since(start).Round(100*time.Millisecond), c.Server)
	return c, nil
}

// schedulerNoSpreading is the scheduler's configuration for NoDefaultSpreading (%s: the
// kubeconfig): the defaults, but PodTopologySpread applies only a pod's own constraints.
const schedulerNoSpreading = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 300
  burst: 600
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
`

func clusterReady(ctx context.Context, cs kubernetes.Interface, nodes []string) error {
	for _, name := range nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return errors.New("node " + name + " not Ready yet")
		}
	}
	_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
	return err
}

// DedicatedTaint keeps the scheduler off nodes made with AddNode: only pods bound to
// them by name run there, so a test that loses such a node never touches the pods of
// other tests sharing the cluster.
const DedicatedTaint = "harness.k8s-container-sp/dedicated"

// AddNode creates an extra fake node that kwok manages, tainted NoSchedule: bind pods to
// it with spec.nodeName.
func AddNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	return addNode(ctx, cs, name, true)
}

func addNode(ctx context.Context, cs kubernetes.Interface, name string, dedicated bool) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
	}
	// What kwok's node-initialize stage gives a node without a status, plus the
	// ephemeral storage every real kubelet reports: the service's pods request some
	// (SP_K8S_EPHEMERAL_STORAGE_REQUEST), and a node without it fits none of them.
	// Set at create, as a kubelet registers its node; kwok keeps a status it finds.
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1k"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods: resource.MustParse("1M"), corev1.ResourceEphemeralStorage: resource.MustParse("1Pi"),
	}
	node.Status = corev1.NodeStatus{Capacity: res, Allocatable: res}
	if dedicated {
		node.Spec.Taints = []corev1.Taint{{Key: DedicatedTaint, Value: name, Effect: corev1.TaintEffectNoSchedule}}
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// RESTConfig is the admin client configuration.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
}

func (c *Cluster) writeKubeconfig(caFile, token string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters[ContextName] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: ca}
	kc.AuthInfos[ContextName] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[ContextName] = &clientcmdapi.Context{Cluster: ContextName, AuthInfo: ContextName, Namespace: "default"}
	kc.CurrentContext = ContextName
	return clientcmd.WriteToFile(*kc, c.Kubeconfig)
}

// Stop ends every process the harness started, by PID, newest first, and removes a
// temporary state folder. A real node joined to this cluster is stopped first: its
// kubelet would be useless without the control plane.
func (c *Cluster) Stop() {
	if n, err := recordedRealNode(); err == nil && c.Kubeconfig != "" && n.JoinedTo(c.Kubeconfig) {
		_ = n.Stop()
	}
	for i := len(c.Processes) - 1; i >= 0; i-- {
		c.Processes[i].stop(5 * time.Second)
	}
	c.Processes = nil
	if c.removeDir {
		_ = os.RemoveAll(c.Dir)
	} else {
		_ = os.Remove(filepath.Join(c.Dir, stateFile))
	}
}

func (c *Cluster) saveState() error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, stateFile), b, 0o644)
}

// Load reads the state a detached cluster left in dir, for `cluster-down`.
func Load(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: %w", stateFile, err)
	}
	return c, nil
}

func httpOK(client *http.Client, url, token string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// auditReadsPolicy: GET and LIST of the kinds the provider caches, at the Metadata level
// (who, what, when); nothing else.
const auditReadsPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["get", "list"]
  resources:
  - group: ""
    resources: ["pods", "services"]
  - group: "apps"
    resources: ["deployments"]
- level: None
`

// AuditLogPath is where the apiserver writes its audit log (Options.AuditReads).
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.Dir, "kube-apiserver-audit.log") }
