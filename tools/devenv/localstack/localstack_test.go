package localstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/buildinfo"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/localstack"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The stack `make run` starts (here on the test run's cluster) reaches the banner, and
// the banner's commands work as printed.
func TestBannerCommandsWork(t *testing.T) {
	env := testenv.Cluster(t)
	ns := testenv.Namespace(t)
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	s, err := localstack.Start(ctx, filepath.Join(t.TempDir(), "local"), []string{
		"SP_K8S_KUBECONFIG=" + env.Kubeconfig, "SP_K8S_NAMESPACE=" + ns, "SP_SERVER_ADDRESS=" + addr,
		"SP_MONITOR_DEBOUNCE_MS=100",
	}, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Cleanup(s.Stop)
	events := &lockedBuilder{}
	if err := s.WatchEvents(events); err != nil {
		t.Fatal(err)
	}
	banner := localstack.Banner(s)
	cmds := s.Commands()
	for _, c := range cmds {
		if !strings.Contains(banner, c) {
			t.Errorf("banner lacks %s", c)
		}
	}
	run := func(c string) map[string]any {
		t.Helper()
		out, err := exec.Command("bash", "-c", c).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", c, err, out)
		}
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		if m == nil {
			m = map[string]any{"raw": strings.TrimSpace(string(out))}
		}
		return m
	}
	// Health names the build: "local", with the commit when Go stamped one (go test
	// does not; make run's go build does).
	if m := run("curl -s " + s.ServiceURL + "/health"); m["version"] != buildinfo.Labelled("local") {
		t.Errorf("health: version %v, want %q: %v", m["version"], buildinfo.Labelled("local"), m)
	}
	// The example's image resolves through the stack's own registry and is pinned.
	if m := run(cmds[0]); m["id"] != "hello" || m["status"] != "PENDING" || !strings.Contains(fmt.Sprint(m["spec"]), "digest:sha256:") {
		t.Errorf("create: %v", m)
	}
	testenv.Eventually(t, 30*time.Second, "hello RUNNING", func() error {
		if m := run(cmds[1]); m["status"] != "RUNNING" {
			return fmt.Errorf("%v", m["status"])
		}
		return nil
	})
	if m := run(cmds[2]); len(m["containers"].([]any)) != 1 {
		t.Errorf("list: %v", m)
	}
	if m := run(cmds[3]); m["id"] != "hello-dcm" {
		t.Errorf("create through the registry: %v", m)
	}
	testenv.Eventually(t, 30*time.Second, "registry shows RUNNING", func() error {
		if m := run(cmds[4]); m["status"] != "RUNNING" {
			return fmt.Errorf("%v", m)
		}
		return nil
	})
	if m := run(cmds[5]); m["raw"] != "204" {
		t.Errorf("delete: %v", m)
	}
	testenv.Eventually(t, 30*time.Second, "events printed", func() error {
		if out := events.String(); !strings.Contains(out, "hello ") || !strings.Contains(out, "DELETED") {
			return fmt.Errorf("events so far:\n%s", out)
		}
		return nil
	})
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
