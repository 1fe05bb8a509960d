package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// Env is one benchmark run's world: a fresh control plane, NATS, and the service binary.
type Env struct {
	Dir     string
	Cluster *harness.Cluster
	Admin   kubernetes.Interface
	// Fill is the admin client speaking protobuf (cheaper for the apiserver), for the
	// populations made where the API is not what is measured.
	Fill kubernetes.Interface
	RC   *rest.Config
	NATS *harness.NATS
	NC   *nats.Conn
	Bin  string
	// ProfBin is the same service built with net/http/pprof added (see profile.go);
	// empty when that build failed.
	ProfBin string
	Log     io.Writer
	http    *http.Client
	poll    *http.Client // short timeout, for readiness polls
}

// Setup builds what is missing and starts the control plane and NATS.
// nodes is how many fake nodes the pods are spread over.
func Setup(ctx context.Context, dir string, nodes int, log io.Writer) (*Env, error) {
	e := &Env{Dir: dir, Log: log, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		poll: &http.Client{Timeout: 2 * time.Second}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e.Bin = filepath.Join(dir, "k8s-container-sp")
	fmt.Fprintln(log, "bench: building the service binary while the control plane starts")
	built := make(chan error, 1)
	go func() { built <- e.build(ctx) }()
	err := e.start(ctx, nodes)
	if buildErr := <-built; err == nil {
		err = buildErr
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// build builds the service binary and the profiling one (without which there is only no
// heap profile).
func (e *Env) build(ctx context.Context) error {
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", e.Bin, "./cmd/k8s-container-sp").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	if err := e.buildProfiling(ctx); err != nil {
		fmt.Fprintf(e.Log, "bench: no profiling build, so no heap profile: %v\n", err)
	}
	return nil
}

// start starts the control plane (nodes fake nodes) and NATS, and makes the clients.
func (e *Env) start(ctx context.Context, nodes int) error {
	var err error
	if e.Cluster, err = harness.Start(ctx, harness.Options{Dir: filepath.Join(e.Dir, "cluster"), Progress: e.Log, NoEndpointControllers: true, NoDefaultSpreading: true, Nodes: nodes, AuditReads: true,
		// GC half as often. No memory limit: near one, the apiserver (3-4 GB at 10,000
		// containers) would collect without pause and crawl.
		Env: []string{"GOGC=200"}}); err != nil {
		return err
	}
	if e.RC, err = e.Cluster.RESTConfig(); err != nil {
		return err
	}
	e.RC.QPS, e.RC.Burst = 2000, 4000
	if e.Admin, err = kubernetes.NewForConfig(e.RC); err != nil {
		return err
	}
	pb := rest.CopyConfig(e.RC)
	pb.ContentType, pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	if e.Fill, err = kubernetes.NewForConfig(pb); err != nil {
		return err
	}
	if err := e.checkAudit(ctx); err != nil {
		return err
	}
	if e.NATS, err = harness.StartNATS(filepath.Join(e.Dir, "nats")); err != nil {
		return err
	}
	e.NC, err = nats.Connect(e.NATS.URL)
	return err
}

// checkAudit proves the audit log attributes reads before any figure relies on it: a
// GET of a Service by this process must appear under this binary's name.
func (e *Env) checkAudit(ctx context.Context) error {
	from := time.Now()
	if _, err := e.Admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		return err
	}
	want := filepath.Base(os.Args[0]) + " GET services"
	if err := waitUntil(ctx, 10*time.Second, func() bool {
		by, err := auditedReads(e.Cluster.AuditLogPath(), from, time.Now())
		return err == nil && by[want] == 1
	}); err != nil {
		return fmt.Errorf("the apiserver's audit log does not show %q: %w", want, err)
	}
	return nil
}

// Close stops everything.
func (e *Env) Close() {
	if e.NC != nil {
		e.NC.Close()
	}
	if e.NATS != nil {
		e.NATS.Stop()
	}
	if e.Cluster != nil {
		e.Cluster.Stop()
	}
}

// Service is one k8s-container-sp process.
type Service struct {
	URL string
	// Started is when the process was started; Log is its log file.
	Started time.Time
	Log     string
	// PprofURL is set when the process is the profiling build (ProfBin).
	PprofURL string
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has exited
	e        *Env
}

// StartService runs the service binary for namespace ns and waits until its caches are
// synced and it publishes status.
func (e *Env) StartService(ctx context.Context, ns string, extraEnv ...string) (*Service, error) {
	s, err := e.Launch(ns, ns, e.Bin, extraEnv...)
	if err != nil {
		return nil, err
	}
	if err := s.WaitUntil(ctx, 60*time.Second, "caches synced and leading", func() bool {
		m, err := s.Metrics()
		return err == nil && m["sp_informers_synced"] == 1 && m["sp_leader"] == 1
	}); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Launch starts the binary bin for namespace ns and returns at once (Started is set just
// before the process starts); name tells its log file apart. With bin == e.ProfBin the
// process also serves net/http/pprof on its own port (PprofURL).
func (e *Env) Launch(ns, name, bin string, extraEnv ...string) (*Service, error) {
	addrs, err := freeAddrs(2)
	if err != nil {
		return nil, err
	}
	addr := addrs[0]
	logPath := filepath.Join(e.Dir, "service-"+name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	env := []string{
		"SP_NAME=k8s-container-sp", "SP_ENDPOINT=http://" + addr, "SP_SERVER_ADDRESS=" + addr,
		"DCM_REGISTRATION_URL=http://127.0.0.1:1/api/v1alpha1", "SP_REGISTRATION_INTERVAL=0",
		"SP_NATS_URL=" + e.NATS.URL, "SP_K8S_NAMESPACE=" + ns, "SP_K8S_KUBECONFIG=" + e.Cluster.Kubeconfig,
		"SP_MONITOR_IDENTITY=" + name,
	}
	s := &Service{URL: "http://" + addr, Log: logPath, e: e}
	if bin == e.ProfBin {
		env = append(env, pprofEnv+"="+addrs[1])
		s.PprofURL = "http://" + addrs[1]
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append(env, extraEnv...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.Started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	logf.Close() // the child has its own descriptor
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.done) }()
	return s, nil
}

// freeAddrs finds n free loopback addresses.
func freeAddrs(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// WaitUntil polls cond every 10 ms until it holds, the process exits, or timeout.
func (s *Service) WaitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if s.exited() {
			return fmt.Errorf("service exited before %s (see %s)", what, s.Log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("service not %s in %s (see %s)", what, timeout, s.Log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// exited reports whether the process has ended.
func (s *Service) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Ready reports whether GET /readyz answers 200.
func (s *Service) Ready() bool {
	resp, err := s.e.poll.Get(s.URL + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Leading reports whether the process publishes status (sp_leader 1).
func (s *Service) Leading() bool {
	m, err := s.Metrics()
	return err == nil && m["sp_leader"] == 1
}

// Stop ends the process gracefully.
func (s *Service) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.done
}

// PID of the service process.
func (s *Service) PID() int { return s.cmd.Process.Pid }

// RSS is the process's resident memory in bytes.
func (s *Service) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

// Metrics reads the service's /metrics into name{labels} -> value.
func (s *Service) Metrics() (map[string]float64, error) {
	resp, err := s.e.http.Get(s.URL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseProm(resp.Body)
}

// APIServerMetrics reads the apiserver's own /metrics.
func (e *Env) APIServerMetrics(ctx context.Context) (map[string]float64, error) {
	b, err := e.Admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseProm(bytes.NewReader(b))
}

// parseProm reads Prometheus text: "name{labels} value" lines, comments skipped.
func parseProm(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// readRequests sums the apiserver's request counter for reads (GET, LIST) of the
// objects the service caches: what a read served from the cache must not cause. by
// breaks it down ("GET deployments").
func readRequests(m map[string]float64) (n float64, by map[string]float64) {
	by = map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "apiserver_request_total{") {
			continue
		}
		vb := labelVerb.FindStringSubmatch(k)
		r := labelResource.FindStringSubmatch(k)
		if vb == nil || r == nil || (vb[1] != "GET" && vb[1] != "LIST") {
			continue
		}
		switch r[1] {
		case "deployments", "pods", "services":
			n += v
			by[vb[1]+" "+r[1]] += v
		}
	}
	return n, by
}

// serviceKubeRequests sums the service's own count of its Kubernetes API requests.
func serviceKubeRequests(m map[string]float64) float64 {
	return sumOf(m, "sp_kubernetes_requests_total", func(string) bool { return true })
}
