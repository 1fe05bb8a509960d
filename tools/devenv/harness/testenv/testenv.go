package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

var (
	once    sync.Once
	env     *Env
	envErr  error
	started *harness.Cluster
)

// Env is the shared control plane of this test run.
type Env struct {
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
}

// Main runs the package's tests and stops a real node and a cluster that it started.
func Main(m *testing.M) {
	code := m.Run()
	if startedNode != nil {
		if err := startedNode.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the real node: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		if code == 0 {
			_ = os.RemoveAll(startedNode.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "testenv: the real node's logs are in %s\n", startedNode.Dir)
		}
	}
	if started != nil {
		started.Stop()
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// ServiceBinary is the k8s-container-sp binary built from this checkout
// (harness.BuildService), once per test binary; Main removes it at the end.
func ServiceBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "sp-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "k8s-container-sp")
		binErr = harness.BuildService(context.Background(), binPath)
	})
	if binErr != nil {
		t.Fatalf("building the service: %v", binErr)
	}
	return binPath
}

// Cluster returns the run's control plane, starting it on first use. Integration tests
// are skipped under -short.
func Cluster(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the real control plane (skipped with -short)")
	}
	once.Do(func() { env, envErr = setup() })
	if envErr != nil {
		t.Fatalf("test control plane: %v", envErr)
	}
	return env
}

func setup() (*Env, error) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if !isHarnessKubeconfig(kubeconfig) {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
		defer cancel()
		c, err := harness.Start(ctx, harness.Options{Progress: os.Stderr})
		if err != nil {
			return nil, err
		}
		started = c
		kubeconfig = c.Kubeconfig
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// Tests create many objects quickly; client-go's default 5 QPS would dominate.
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Kubeconfig: kubeconfig, Config: cfg, Client: cs}, nil
}

// isHarnessKubeconfig is true when path is a kubeconfig whose current context is the
// harness's: tests never touch a developer's real cluster by accident.
func isHarnessKubeconfig(path string) bool {
	if path == "" || strings.Contains(path, string(os.PathListSeparator)) {
		return false
	}
	cfg, err := clientcmd.LoadFromFile(path)
	return err == nil && cfg.CurrentContext == harness.ContextName
}

var (
	realOnce    sync.Once
	realNode    *harness.RealNode
	realSkip    string
	realErr     error
	startedNode *harness.RealNode
)

// RealNode returns the run's real node (a real kubelet with containerd, see
// harness.StartRealNode), joined to the run's cluster. It is skipped under -short and,
// with the reason, where the machine cannot run one (harness.RealNodeSupported) or the
// run has none. It reuses the node `sp-harness exec -real-node` (make test) or
// `sp-harness up -real-node` (make cluster-up REAL_NODE=1) started for this cluster;
// otherwise it starts one, once per test binary, stopped when the binary ends. Pods get
// there from a namespace made with harness.RealNodeNamespace (RealNodeNamespace below).
func RealNode(t testing.TB) *harness.RealNode {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a real node (skipped with -short)")
	}
	if err := harness.RealNodeSupported(); err != nil {
		t.Skipf("no real node on this machine: %v", err)
	}
	if reason, ok := strings.CutPrefix(os.Getenv(harness.RealNodeEnv), "unavailable:"); ok {
		t.Skip("no real node in this run:" + reason)
	}
	e := Cluster(t)
	realOnce.Do(func() { realNode, realSkip, realErr = setupRealNode(e) })
	if realSkip != "" {
		t.Skip(realSkip)
	}
	if realErr != nil {
		t.Fatalf("real node: %v", realErr)
	}
	lockRealNode(t, realNode, syscall.LOCK_SH)
	return realNode
}

// RealNodeExclusive is RealNode for a test that disturbs the node (stops its kubelet):
// it waits until no other test, in any test binary of the run, uses the node, and keeps
// the others out until it ends.
func RealNodeExclusive(t testing.TB) *harness.RealNode {
	t.Helper()
	exclusiveMu.Lock()
	exclusive[t.Name()] = true
	exclusiveMu.Unlock()
	t.Cleanup(func() {
		exclusiveMu.Lock()
		delete(exclusive, t.Name())
		exclusiveMu.Unlock()
	})
	n := RealNode(t)
	lockRealNode(t, n, syscall.LOCK_EX)
	return n
}

var (
	exclusiveMu sync.Mutex
	exclusive   = map[string]bool{} // tests holding the node alone
)

// lockRealNode holds a lock on the node for the rest of the test: shared for ordinary
// tests, exclusive for those that disturb the node. The lock is a flock on a file in
// the node's folder, so it works across the test binaries `go test ./...` runs at once.
// A test that holds the exclusive lock takes no shared one (flock would deadlock).
func lockRealNode(t testing.TB, n *harness.RealNode, how int) {
	t.Helper()
	exclusiveMu.Lock()
	skip := how == syscall.LOCK_SH && exclusive[t.Name()]
	exclusiveMu.Unlock()
	if skip {
		return
	}
	unlock, err := harness.LockFile(filepath.Join(n.Dir, "tests.lock"), how)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
}

func setupRealNode(e *Env) (*harness.RealNode, string, error) {
	if n, err := harness.LoadRealNode(); err == nil {
		if n.JoinedTo(e.Kubeconfig) {
			return n, "", nil
		}
		return nil, fmt.Sprintf("the machine's real node (one per machine) belongs to another cluster (%s)", n.Kubeconfig), nil
	}
	dir, err := os.MkdirTemp("", "sp-realnode-")
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	n, err := harness.StartRealNode(ctx, &harness.Cluster{Kubeconfig: e.Kubeconfig}, dir, os.Stderr)
	if errors.Is(err, harness.ErrRealNodeBusy) {
		_ = os.RemoveAll(dir)
		return nil, err.Error(), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w (logs in %s)", err, dir)
	}
	startedNode = n
	return n, "", nil
}

// RealNodeNamespace is Namespace made with harness.RealNodeNamespace: every pod created in
// it, by the test or by the service, runs on the real node. It skips like RealNode.
func RealNodeNamespace(t testing.TB) (*harness.RealNode, string) {
	t.Helper()
	n := RealNode(t)
	e := Cluster(t)
	name := nsName(t)
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if err := harness.RealNodeNamespace(context.Background(), e.Client, name); err != nil {
		t.Fatal(err)
	}
	return n, name
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for this test, waits until pods can be created in it
// (its default ServiceAccount exists) and deletes it when the test ends, without waiting.
func Namespace(t testing.TB) string {
	t.Helper()
	e := Cluster(t)
	name := nsName(t)
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if err := harness.EnsureNamespace(context.Background(), e.Client, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// nsName is a fresh namespace name derived from the test's name.
func nsName(t testing.TB) string {
	prefix := nonName.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	return strings.Trim(prefix, "-") + "-" + randSuffix()
}

// NATS starts an embedded NATS server with JetStream for this test and stops it at the end.
func NATS(t testing.TB) *harness.NATS {
	t.Helper()
	n, err := harness.StartNATS(t.TempDir())
	if err != nil {
		t.Fatalf("starting NATS: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Eventually polls cond every 50 ms until it returns nil or timeout passes; the last error
// explains a failure.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Registry starts DCM's registry (built once into the cache) against natsURL, with its
// own database, and stops it when the test ends.
func Registry(t testing.TB, natsURL string) *harness.Registry {
	t.Helper()
	r := UnstartedRegistry(t, natsURL)
	if err := r.Start(); err != nil {
		t.Fatalf("starting the registry: %v", err)
	}
	return r
}

// UnstartedRegistry is Registry without the start: its URL is known, Start it later.
func UnstartedRegistry(t testing.TB, natsURL string) *harness.Registry {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the DCM registry (skipped with -short)")
	}
	bins, err := harness.EnsureBinaries(context.Background(), os.Stderr)
	if err != nil {
		t.Fatalf("building the registry: %v", err)
	}
	r, err := harness.NewRegistry(bins.Registry, t.TempDir(), natsURL, false)
	if err != nil {
		t.Fatalf("preparing the registry: %v", err)
	}
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(r.Log()); err == nil {
				t.Logf("registry log:\n%s", tail(string(b), 60))
			}
		}
	})
	return r
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
