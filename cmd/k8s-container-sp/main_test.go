package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/devenv/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the real k8s-container-sp once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sp-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "k8s-container-sp")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestBadConfigurationStopsWithAClearMessage(t *testing.T) {
	cmd := exec.Command(binary(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SP_K8S_EXTERNAL_SVC_TYPE=Ingress"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	exit, ok := err.(*exec.ExitError)
	if !ok || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2", err)
	}
	for _, want := range []string{"SP_NAME", "SP_ENDPOINT", "DCM_REGISTRATION_URL", "SP_NATS_URL"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("message does not name %s: %s", want, stderr.String())
		}
	}
}

// A kubeconfig the service's user cannot read (DCM's compose mounts the host's, mode
// 0600, into a container running as uid 65532) stops it with one line naming the path,
// the uid and the fix.
func TestUnreadableKubeconfigIsOneClearLine(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the binary as another user")
	}
	bin := binary(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sp-kc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"SP_NAME=sp", "SP_ENDPOINT=http://127.0.0.1:1", "DCM_REGISTRATION_URL=http://127.0.0.1:1/api",
		"SP_NATS_URL=nats://127.0.0.1:1", "SP_K8S_KUBECONFIG=" + kc, "AUTOMEMLIMIT=off"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2; stderr: %s", err, stderr.String())
	}
	out := strings.TrimSpace(stderr.String())
	if strings.Count(out, "\n") != 0 {
		t.Errorf("want one line, got:\n%s", out)
	}
	for _, want := range []string{kc, "uid 65532", "permission denied", "--user"} {
		if !strings.Contains(out, want) {
			t.Errorf("message does not say %q: %s", want, out)
		}
	}
}

// process is one k8s-container-sp process.
type process struct {
	cmd  *exec.Cmd
	url  string
	logs *bytes.Buffer
}

func start(t *testing.T, env []string) *process {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &process{url: "http://" + addr, logs: &bytes.Buffer{}}
	p.cmd = exec.Command(binary(t))
	p.cmd.Env = append(os.Environ(), append(env, "SP_SERVER_ADDRESS="+addr)...)
	p.cmd.Stderr = &lockedWriter{w: p.logs}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("logs of %s:\n%s", addr, p.logs)
		}
	})
	testenv.Eventually(t, 20*time.Second, "health", func() error {
		resp, err := http.Get(p.url + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// The leader is killed (it cannot resign): the other replica takes over when the
// Lease expires, within 20 s, and republishes the current state.
func TestLeaderCrashFailover(t *testing.T) {
	env := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "dcm-status", Subjects: []string{"dcm.*"}})
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"SP_NAME=k8s-container-sp", "SP_ENDPOINT=http://127.0.0.1:8080",
		"DCM_REGISTRATION_URL=http://127.0.0.1:1/api/v1alpha1", "SP_NATS_URL=" + srv.URL,
		"SP_K8S_NAMESPACE=" + ns, "SP_K8S_KUBECONFIG=" + env.Kubeconfig, "SP_MONITOR_DEBOUNCE_MS=100"}
	procs := map[string]*process{
		"replica-a": start(t, append(common, "SP_MONITOR_IDENTITY=replica-a")),
		"replica-b": start(t, append(common, "SP_MONITOR_IDENTITY=replica-b")),
	}
	holder := func() string {
		l, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "k8s-container-sp-status", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader string
	testenv.Eventually(t, 30*time.Second, "a leader", func() error {
		if leader = holder(); procs[leader] == nil {
			return fmt.Errorf("holder %q", leader)
		}
		return nil
	})
	body := `{"spec":{"service_type":"container","metadata":{"name":"web"},"image":{"reference":"nginx"},
	  "resources":{"cpu":{"min":1,"max":1},"memory":{"min":"64MB","max":"64MB"}}}}`
	resp, err := http.Post(procs["replica-a"].url+"/api/v1alpha1/containers?id=web", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	running := func() int {
		n := 0
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return 0
		}
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			return 0
		}
		for m := range batch.Messages() {
			var ev struct{ Data struct{ ID, Status string } }
			if json.Unmarshal(m.Data(), &ev) == nil && ev.Data.ID == "web" && ev.Data.Status == "RUNNING" {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, 30*time.Second, "RUNNING event", func() error {
		if running() == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	before := running()

	killed := time.Now()
	if err := procs[leader].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the other replica leads and republishes", func() error {
		if h := holder(); h == leader || procs[h] == nil {
			return fmt.Errorf("holder %q", h)
		}
		if running() == before {
			return fmt.Errorf("not republished yet")
		}
		return nil
	})
	t.Logf("failover after a crash took %s", time.Since(killed).Round(100*time.Millisecond))
}

// The Go runtime's memory limit follows the container's: 90% of the cgroup's memory
// limit, with no GOMEMLIMIT set by the operator.
func TestGoMemoryLimitFollowsTheCgroup(t *testing.T) {
	dir := "/sys/fs/cgroup/memory/sp-memlimit-test"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup (cgroup v1 memory controller, root needed): %v", err)
	}
	defer os.Remove(dir)
	if err := os.WriteFile(dir+"/memory.limit_in_bytes", []byte("268435456"), 0o644); err != nil {
		t.Skipf("cannot limit the cgroup: %v", err)
	}
	// The shell joins the cgroup, then becomes the service (which stops at once: no
	// kubeconfig), so the limit is in place before the Go runtime starts.
	cmd := exec.Command("sh", "-c", "echo $$ > "+dir+"/cgroup.procs && exec "+binary(t))
	cmd.Env = []string{"SP_NAME=sp", "SP_ENDPOINT=http://127.0.0.1:1", "DCM_REGISTRATION_URL=http://127.0.0.1:1/api",
		"SP_NATS_URL=nats://127.0.0.1:1", "SP_K8S_KUBECONFIG=/nonexistent"}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), `"msg":"Go memory limit","bytes":241591910`) { // 0.9 * 256 MiB
		t.Errorf("no memory limit from the cgroup:\n%s", out)
	}
}
