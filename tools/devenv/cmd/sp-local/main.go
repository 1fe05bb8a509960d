// Command sp-local runs the whole stack on this machine (`make run`): a Kubernetes
// control plane with a kwok node, NATS with JetStream, the DCM registry and the service
// on http://127.0.0.1:8080, registered with the registry. Ctrl-C stops everything.
//
// Settings from the environment: SP_K8S_KUBECONFIG, SP_NATS_URL and
// DCM_REGISTRATION_URL use existing parts instead of local ones; other SP_ settings go
// to the service (e.g. SP_SERVER_ADDRESS, SP_K8S_NAMESPACE). -real-node (or REAL_NODE=1)
// adds a real node (a real kubelet + containerd, root only) and runs the service's
// containers there.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/localstack"
)

func main() {
	realNode := flag.Bool("real-node", os.Getenv("REAL_NODE") == "1", "run the containers on a real node (kubelet + containerd)")
	flag.Parse()
	environ := os.Environ()
	if *realNode {
		environ = append(environ, "REAL_NODE=1")
	} else {
		environ = append(environ, "REAL_NODE=0")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := filepath.Abs(filepath.Join(".harness", "local"))
	if err != nil {
		fail(err)
	}
	s, err := localstack.Start(ctx, dir, environ, os.Stderr)
	if err != nil {
		fail(err)
	}
	defer s.Stop()
	fmt.Print(localstack.Banner(s))
	if err := s.WatchEvents(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "local: cannot watch status events:", err)
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "\nlocal: stopping everything")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "local:", err)
	os.Exit(1)
}
