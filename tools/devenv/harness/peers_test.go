package harness_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// make cluster-up's NATS and registry are processes of the cluster: NATS serves
// JetStream, the registry answers, both are in the cluster's saved state, and stopping
// the cluster from that state (as make cluster-down does, in another process) ends them.
func TestPeersStopWithTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the registry binary and builds sp-harness (skipped with -short)")
	}
	ctx := context.Background()
	bins, err := harness.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(t.TempDir(), "sp-harness")
	build := exec.Command("go", "build", "-o", self, "./cmd/sp-harness")
	build.Dir = filepath.Join(root, "tools", "devenv")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building sp-harness: %v\n%s", err, out)
	}

	c := &harness.Cluster{Dir: t.TempDir()}
	t.Cleanup(c.Stop)
	peers, err := c.StartPeers(self, bins.Registry)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(peers.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Errorf("JetStream: %v", err)
	}
	nc.Close()
	resp, err := http.Get(peers.RegistryURL + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("registry health: %v %v", resp, err)
	}
	resp.Body.Close()

	saved, err := harness.Load(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Processes) != 2 {
		t.Fatalf("saved state has %d processes, want NATS and the registry", len(saved.Processes))
	}
	saved.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, natsErr := nats.Connect(peers.NATSURL, nats.Timeout(time.Second))
		_, regErr := http.Get(peers.RegistryURL + "/health")
		if natsErr != nil && regErr != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still answering after Stop: NATS %v, registry %v", natsErr, regErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
