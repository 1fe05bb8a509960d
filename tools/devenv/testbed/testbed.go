package testbed

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// Env is one run's world: a fresh control plane, NATS, and the service binary.
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
	// Bin is the service binary (built with Options.BuildFlags).
	Bin  string
	Log  io.Writer
	http *http.Client
	poll *http.Client // short timeout, for readiness polls
}

// Options of Setup.
type Options struct {
	// Dir holds the binary, the cluster, NATS's store and every process's log.
	Dir string
	// Nodes is how many fake nodes the pods are spread over.
	Nodes int
	// Log receives progress.
	Log io.Writer
	// AuditReads: the apiserver logs who read what (harness.Options.AuditReads), for the
	// benchmark's attribution of reads.
	AuditReads bool
	// BuildFlags are extra `go build` flags for the service binary (the chaos run's
	// -tags for a planted bug).
	BuildFlags []string
	// AlsoBuild, when set, runs after the service's build, still while the control
	// plane starts (the benchmark's profiling build).
	AlsoBuild func(ctx context.Context) error
	// ControlPlaneCPUs: the CPUs the control plane runs on (harness.Options.CPUs).
	ControlPlaneCPUs []int
}

// Setup builds what is missing and starts the control plane and NATS; the service binary
// builds meanwhile. On error, what was started is stopped.
func Setup(ctx context.Context, o Options) (*Env, error) {
	e := &Env{Dir: o.Dir, Log: o.Log, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		poll: &http.Client{Timeout: 2 * time.Second}}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	e.Bin = filepath.Join(o.Dir, "k8s-container-sp")
	fmt.Fprintln(o.Log, "testbed: building the service binary while the control plane starts")
	built := make(chan error, 1)
	go func() {
		err := harness.BuildService(ctx, e.Bin, o.BuildFlags...)
		if err == nil && o.AlsoBuild != nil {
			err = o.AlsoBuild(ctx)
		}
		built <- err
	}()
	err := e.start(ctx, o)
	if buildErr := <-built; err == nil {
		err = buildErr
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// start starts the control plane (o.Nodes fake nodes) and NATS, and makes the clients.
func (e *Env) start(ctx context.Context, o Options) error {
	var err error
	if e.Cluster, err = harness.Start(ctx, harness.Options{Dir: filepath.Join(e.Dir, "cluster"), Progress: e.Log, NoEndpointControllers: true, NoDefaultSpreading: true, Nodes: o.Nodes, AuditReads: o.AuditReads, CPUs: o.ControlPlaneCPUs,
		// GC a quarter as often: at GOGC=200 the apiserver still spent 16% of its CPU
		// marking at 5,000 containers (profiled), and the benchmark's fill is CPU-bound.
		// No memory limit: near one, the apiserver (3-4 GB at 10,000 containers with
		// GOGC=200) would collect without pause and crawl.
		Env: []string{"GOGC=400"}}); err != nil {
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
	if e.NATS, err = harness.StartNATS(filepath.Join(e.Dir, "nats")); err != nil {
		return err
	}
	e.NC, err = nats.Connect(e.NATS.URL)
	return err
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
	// Env is the service's settings (SP_ and DCM_ variables) as the process got them.
	Env  []string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	e    *Env
}

// StartService runs the service binary for namespace ns and waits until its caches are
// synced and it publishes status.
func (e *Env) StartService(ctx context.Context, ns string, extraEnv ...string) (*Service, error) {
	s, err := e.Launch(ns, ns, e.Bin, extraEnv...)
	if err != nil {
		return nil, err
	}
	if err := s.WaitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// WaitReady waits until s's caches have synced and it leads; it stops s when they do
// not within a minute.
func (s *Service) WaitReady(ctx context.Context) error {
	if err := s.WaitUntil(ctx, 60*time.Second, "caches synced and leading", func() bool {
		m, err := s.Metrics()
		return err == nil && m["sp_informers_synced"] == 1 && m["sp_leader"] == 1
	}); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Launch starts the binary bin for namespace ns and returns at once (Started is set just
// before the process starts); name tells its log file apart and is its leader-election
// identity. The process is tied to this one (proc.Tie): it never outlives the run.
func (e *Env) Launch(ns, name, bin string, extraEnv ...string) (*Service, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(e.Dir, "service-"+name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	env := []string{
		"SP_NAME=k8s-container-sp", "SP_ENDPOINT=http://" + addr, "SP_SERVER_ADDRESS=" + addr,
		"DCM_REGISTRATION_URL=http://127.0.0.1:1/api/v1alpha1", "SP_REGISTRATION_INTERVAL=0",
		"SP_NATS_URL=" + e.NATS.URL, "SP_K8S_NAMESPACE=" + ns, "SP_K8S_KUBECONFIG=" + e.Cluster.Kubeconfig,
		"SP_MONITOR_IDENTITY=" + name, "SP_IMAGE_REGISTRIES=" + harness.ImageRegistries, harness.ResolveOff,
	}
	s := &Service{URL: "http://" + addr, Log: logPath, Env: append(env, extraEnv...), e: e}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.Tie(cmd)
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

// Client is the HTTP client for requests to the service (30 s timeout, connections
// kept for many parallel clients).
func (s *Service) Client() *http.Client { return s.e.http }

// Metrics reads the service's /metrics into name{labels} -> value.
func (s *Service) Metrics() (map[string]float64, error) {
	resp, err := s.e.http.Get(s.URL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return ParseProm(resp.Body)
}

// APIServerMetrics reads the apiserver's own /metrics.
func (e *Env) APIServerMetrics(ctx context.Context) (map[string]float64, error) {
	b, err := e.Admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return ParseProm(bytes.NewReader(b))
}

// ParseProm reads Prometheus text: "name{labels} value" lines, comments skipped.
func ParseProm(r io.Reader) (map[string]float64, error) {
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
