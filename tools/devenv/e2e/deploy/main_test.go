// Package deploy_test proves the service as DCM users run it: make image's image, pulled
// from the real node's registry, installed with the project's Helm chart (its containers
// in a namespace of their own, the NetworkPolicies on, enforced by the node's
// kube-network-policies), running as pods on the real node that reach the apiserver
// through the kubernetes Service.
package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/deploy"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/image"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// imageRef is the name the pods pull: DCM's chart's image name, served by the node's
// registry.
const imageRef = image.DefaultRepository + ":e2e"

var (
	buildOnce sync.Once
	built     *image.Result
	buildErr  error
)

// serviceImage builds the service's image once per test binary, as make image does,
// for this machine's platform only.
func serviceImage(t *testing.T) *image.Result {
	t.Helper()
	buildOnce.Do(func() {
		root, err := harness.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sp-e2e-image-")
		if err != nil {
			buildErr = err
			return
		}
		rev, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		built, buildErr = image.Build(context.Background(), image.Options{Root: root, Version: "v0.0.0-e2e",
			Revision: strings.TrimSpace(string(rev)) + "-e2e", Ref: imageRef, Platforms: []string{"linux/" + runtime.GOARCH}, OutDir: dir})
	})
	if buildErr != nil {
		t.Fatalf("make image: %v", buildErr)
	}
	return built
}

// install deploys the chart into a new real-node namespace (or o.Namespace), with NATS
// and DCM's registry of this test, its containers in the chart's default namespace
// beside it (<namespace>-containers, made a real-node namespace too), and removes both
// when the test ends. It returns the provider's namespace.
func install(t *testing.T, natsURL, registryURL string, replicas int, o deploy.Options) (*deploy.Installed, string) {
	t.Helper()
	node := testenv.RealNode(t)
	e := testenv.Cluster(t)
	img := serviceImage(t)
	ns := o.Namespace
	if ns == "" {
		ns = testenv.Namespace(t)
	}
	containers := deploy.DefaultContainersNamespace(ns)
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), containers, metav1.DeleteOptions{})
	})
	o.Kubeconfig, o.Namespace, o.Image, o.ImageRef = e.Kubeconfig, ns, img.LayoutDir, imageRef
	o.Replicas, o.NATSURL, o.RegistrationURL, o.Out = replicas, natsURL, registryURL, testWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in, err := deploy.Install(ctx, node, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := deploy.Uninstall(context.Background(), o); err != nil {
			t.Errorf("uninstall: %v", err)
		}
	})
	t.Logf("installed %s in %s (containers in %s): %d pods ready %s after Install began (image push, helm install, pods pulled, started, /readyz): %v",
		in.Release, ns, in.ContainersNamespace, len(in.URLs), in.Took.Round(100*time.Millisecond), in.URLs)
	return in, ns
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// call is one HTTP request with a JSON body; it returns the status and the body.
func call(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// spec is a small container running the real node's non-root web test image.
func spec(name string) map[string]any {
	return map[string]any{
		"service_type": "container",
		"metadata":     map[string]any{"name": name},
		"image":        map[string]any{"reference": harness.TestImageNonRoot("web")}, // the chart's default profile is restricted
		"resources": map[string]any{"cpu": map[string]any{"min": "100m", "max": "500m"},
			"memory": map[string]any{"min": "64MB", "max": "128MB"}},
	}
}

// events collects the status events published on NATS, by container id.
type events struct {
	mu   sync.Mutex
	byID map[string][]string // statuses in order
	ids  map[string]int      // CloudEvent id -> times seen
}

func subscribe(t *testing.T, url string) *events {
	t.Helper()
	ev := &events{byID: map[string][]string{}, ids: map[string]int{}}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe("dcm.container", func(m *nats.Msg) {
		var ce struct {
			ID   string `json:"id"`
			Data struct {
				ID, Status string
			} `json:"data"`
		}
		if json.Unmarshal(m.Data, &ce) == nil {
			ev.mu.Lock()
			ev.byID[ce.Data.ID] = append(ev.byID[ce.Data.ID], ce.Data.Status)
			ev.ids[ce.ID]++
			ev.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ev
}

func (ev *events) wait(t *testing.T, id, status string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("event %s %s", id, status), func() error {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		for _, s := range ev.byID[id] {
			if s == status {
				return nil
			}
		}
		return fmt.Errorf("events for %s: %v", id, ev.byID[id])
	})
}

// serviceProcesses are the /proc status fields of the service's processes running from
// the image (the pods run on this machine): their executable is /k8s-container-sp, as
// seen from inside the container; the service started by other tests runs from a file
// elsewhere.
func serviceProcesses(t *testing.T) []map[string]string {
	t.Helper()
	var out []map[string]string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		exe, err := os.Readlink(filepath.Join(d, "exe"))
		if err != nil || exe != "/k8s-container-sp" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue
		}
		st := map[string]string{"pid": filepath.Base(d)}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				st[k] = strings.TrimSpace(v)
			}
		}
		out = append(out, st)
	}
	return out
}
