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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/devenv/harness"
)

// Env is one benchmark run's world: a fresh control plane, NATS, and the service binary.
type Env struct {
	Dir     string
	Cluster *harness.Cluster
	Admin   kubernetes.Interface
	RC      *rest.Config
	NATS    *harness.NATS
	NC      *nats.Conn
	Bin     string
	Log     io.Writer
	http    *http.Client
}

// Setup builds what is missing and starts the control plane and NATS.
func Setup(ctx context.Context, dir string, log io.Writer) (*Env, error) {
	e := &Env{Dir: dir, Log: log, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e.Bin = filepath.Join(dir, "k8s-container-sp")
	fmt.Fprintln(log, "bench: building the service binary")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", e.Bin, "./cmd/k8s-container-sp").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v: %s", err, out)
	}
	var err error
	if e.Cluster, err = harness.Start(ctx, harness.Options{Progress: log}); err != nil {
		return nil, err
	}
	if e.RC, err = e.Cluster.RESTConfig(); err != nil {
		return nil, err
	}
	e.RC.QPS, e.RC.Burst = 2000, 4000
	if e.Admin, err = kubernetes.NewForConfig(e.RC); err != nil {
		return nil, err
	}
	if e.NATS, err = harness.StartNATS(filepath.Join(dir, "nats")); err != nil {
		return nil, err
	}
	if e.NC, err = nats.Connect(e.NATS.URL); err != nil {
		return nil, err
	}
	return e, nil
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
	cmd *exec.Cmd
	e   *Env
}

// StartService runs the service binary for namespace ns and waits until its caches are
// synced and it publishes status.
func (e *Env) StartService(ctx context.Context, ns string, extraEnv ...string) (*Service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(e.Dir, "service-"+ns+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.Bin)
	cmd.Env = append(os.Environ(), append([]string{
		"SP_NAME=k8s-container-sp", "SP_ENDPOINT=http://" + addr, "SP_SERVER_ADDRESS=" + addr,
		"DCM_REGISTRATION_URL=http://127.0.0.1:1/api/v1alpha1", "SP_REGISTRATION_INTERVAL=0",
		"SP_NATS_URL=" + e.NATS.URL, "SP_K8S_NAMESPACE=" + ns, "SP_K8S_KUBECONFIG=" + e.Cluster.Kubeconfig,
	}, extraEnv...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Service{URL: "http://" + addr, cmd: cmd, e: e}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		m, err := s.Metrics()
		if err == nil && m["sp_informers_synced"] == 1 && m["sp_leader"] == 1 {
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("service for %s not ready in 60s (see %s)", ns, logf.Name())
}

// Stop ends the process gracefully.
func (s *Service) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
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
// objects the service caches, in namespace ns: what a read served from the cache must
// not cause.
func readRequests(m map[string]float64) float64 {
	var n float64
	for k, v := range m {
		if !strings.HasPrefix(k, "apiserver_request_total{") {
			continue
		}
		if !(strings.Contains(k, `verb="GET"`) || strings.Contains(k, `verb="LIST"`)) {
			continue
		}
		for _, r := range []string{`resource="deployments"`, `resource="pods"`, `resource="services"`} {
			if strings.Contains(k, r) {
				n += v
			}
		}
	}
	return n
}

// serviceKubeRequests sums the service's own count of its Kubernetes API requests.
func serviceKubeRequests(m map[string]float64) float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "sp_kubernetes_requests_total{") {
			n += v
		}
	}
	return n
}
