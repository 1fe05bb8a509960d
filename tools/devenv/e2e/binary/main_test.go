package binary_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// binary is the real k8s-container-sp, built once per test run.
func binary(t *testing.T) string { return testenv.ServiceBinary(t) }

// process is one k8s-container-sp process.
type process struct {
	cmd  *exec.Cmd
	url  string
	logs *bytes.Buffer
}

func start(t *testing.T, env []string) *process {
	t.Helper()
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{url: "http://" + addr, logs: &bytes.Buffer{}}
	p.cmd = exec.Command(binary(t))
	p.cmd.Env = append(os.Environ(), append(env, "SP_SERVER_ADDRESS="+addr)...)
	p.cmd.Stderr = &lockedWriter{w: p.logs}
	proc.Tie(p.cmd)
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

// The leader is killed (it cannot resign): the other replica takes over when its hold
// on the lock ConfigMap expires, within 20 s, and republishes the current state.
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
		"SP_K8S_NAMESPACE=" + ns, "SP_K8S_KUBECONFIG=" + env.Kubeconfig, "SP_MONITOR_DEBOUNCE_MS=100", "SP_IMAGE_RESOLVE=false"}
	procs := map[string]*process{
		"replica-a": start(t, append(common, "SP_MONITOR_IDENTITY=replica-a")),
		"replica-b": start(t, append(common, "SP_MONITOR_IDENTITY=replica-b")),
	}
	holder := func() string { return lockHolder(env.Client, ns) }
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

// lockHolder is the identity holding the leader election's lock ConfigMap
// (k8s-container-sp-status, the record in its control-plane.alpha.kubernetes.io/leader
// annotation); "" when none.
func lockHolder(cs kubernetes.Interface, ns string) string {
	c, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "k8s-container-sp-status", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	var rec resourcelock.LeaderElectionRecord
	if json.Unmarshal([]byte(c.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]), &rec) != nil {
		return ""
	}
	return rec.HolderIdentity
}
