// Command sp-harness runs the project's test control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok on 127.0.0.1), optionally with a real
// node (a real kubelet with containerd; -real-node, or REAL_NODE=1 in the environment).
//
//	sp-harness build [-real-node]                build the binaries into the cache (once per version)
//	sp-harness up    [-dir DIR] [-real-node]     start a cluster, NATS and DCM's registry in the background,
//	                                             print KUBECONFIG=..., SP_NATS_URL=..., DCM_REGISTRATION_URL=...
//	                                             (with a real node also REGISTRY=..., POD_NATS_URL=...,
//	                                             POD_DCM_REGISTRATION_URL=...: the URLs a pod on the node uses)
//	sp-harness down  [-dir DIR]                  stop all that up started (and its real node), by PID
//	sp-harness exec  [-real-node] -- CMD ARGS... start a cluster, run CMD with KUBECONFIG set, stop it
//	sp-harness push-image SRC NAME               push an image (OCI layout or tarball: make image, docker/podman save)
//	                                             to the real node's registry as NAME, the name pods use
//	sp-harness deploy -image DIR -ref NAME [-replicas N] [-namespace NS]
//	                                             install the service's image with its Helm chart onto the cluster
//	                                             in KUBECONFIG (its pods on the real node); needs SP_NATS_URL and
//	                                             DCM_REGISTRATION_URL as make cluster-up prints them
//	sp-harness undeploy [-namespace NS]          remove what deploy installed
//	sp-harness clean-real-node                   stop this machine's real node and remove all it left
//	sp-harness serve-nats -store DIR -port N     (for up) serve NATS with JetStream until SIGTERM
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/deploy"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", filepath.Join(".harness", "cluster"), "state folder of a background cluster (up/down)")
	realNode := fs.Bool("real-node", os.Getenv("REAL_NODE") == "1", "also run a real node: kubelet + containerd (build/up/exec)")
	store := fs.String("store", "", "JetStream store folder (serve-nats)")
	port := fs.Int("port", 0, "loopback port (serve-nats)")
	imageDir := fs.String("image", filepath.Join("bin", "image", "oci"), "make image's OCI layout (deploy)")
	imageRef := fs.String("ref", "", "the image's name, as pods pull it (deploy)")
	replicas := fs.Int("replicas", 1, "replicas (deploy)")
	namespace := fs.String("namespace", deploy.DefaultNamespace, "the provider's namespace (deploy, undeploy)")
	_ = fs.Parse(os.Args[2:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	code := 0
	switch os.Args[1] {
	case "build":
		err = build(ctx, *realNode)
	case "up":
		err = up(ctx, *dir, *realNode)
	case "down":
		err = down(*dir)
	case "exec":
		code, err = execWithCluster(ctx, fs.Args(), *realNode)
	case "push-image":
		err = pushImage(ctx, fs.Args())
	case "deploy":
		err = deployService(ctx, deploy.Options{Image: *imageDir, ImageRef: *imageRef, Replicas: *replicas, Namespace: *namespace})
	case "undeploy":
		err = deploy.Uninstall(ctx, deploy.Options{Kubeconfig: os.Getenv("KUBECONFIG"), Namespace: *namespace, Out: os.Stderr})
		if err == nil {
			fmt.Fprintf(os.Stderr, "sp-harness: removed the release %s from %s (the containers it made stay: k8s-container-sp release removes them)\n",
				deploy.DefaultRelease, *namespace)
		}
	case "clean-real-node":
		err = harness.CleanupRealNodeLeftovers(os.Stderr)
	case "serve-nats":
		err = serveNATS(ctx, *store, *port)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sp-harness:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: sp-harness build [-real-node] | up [-dir DIR] [-real-node] | down [-dir DIR] |"+
		" exec [-real-node] -- CMD [ARGS...] | push-image SRC NAME | deploy -image DIR -ref NAME [-replicas N] [-namespace NS] | undeploy [-namespace NS] | clean-real-node | serve-nats -store DIR -port N")
	os.Exit(2)
}

func build(ctx context.Context, realNode bool) error {
	if _, err := harness.EnsureBinaries(ctx, os.Stderr); err != nil {
		return err
	}
	if !realNode {
		return nil
	}
	if err := harness.RealNodeSupported(); err != nil {
		fmt.Fprintf(os.Stderr, "sp-harness: not building the kubelet: no real node on this machine: %v\n", err)
		return nil
	}
	if _, err := harness.EnsureKubelet(ctx, os.Stderr); err != nil {
		return err
	}
	_, err := harness.EnsureNetworkPolicyEnforcer(ctx, os.Stderr)
	return err
}

func up(ctx context.Context, dir string, realNode bool) error {
	if c, err := harness.Load(dir); err == nil && len(c.Processes) > 0 {
		return fmt.Errorf("a cluster is already running from %s (KUBECONFIG=%s); run `make cluster-down` first", dir, c.Kubeconfig)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	c, err := harness.Start(ctx, harness.Options{Dir: abs, Detached: true, Progress: os.Stderr})
	if err != nil {
		return err
	}
	var node *harness.RealNode
	if realNode {
		if node, err = harness.StartRealNode(ctx, c, filepath.Join(abs, "realnode"), os.Stderr); err != nil {
			c.Stop()
			return fmt.Errorf("real node: %w (the control plane was stopped again)", err)
		}
		fmt.Fprintf(os.Stderr, "sp-harness: real node %s is Ready (label and NoSchedule taint %s=true); it pulls only from its "+
			"image registry %s, which has example.invalid/<role>:v1; push your own with:\n  %s\n",
			harness.RealNodeName, harness.RealNodeLabel, node.Registry, harness.PushCommand)
	}
	bins, err := harness.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		c.Stop()
		return err
	}
	self, err := os.Executable()
	if err != nil {
		c.Stop()
		return err
	}
	peers, err := c.StartPeers(self, bins.Registry)
	if err != nil {
		c.Stop()
		return fmt.Errorf("NATS and the registry: %w (the cluster was stopped again)", err)
	}
	fmt.Fprintf(os.Stderr, "sp-harness: NATS with JetStream on %s, DCM's registry (service-provider-manager %s) on %s\n",
		peers.NATSURL, harness.RegistryVersion, peers.RegistryURL)
	// One VAR=value per line: `export $(make cluster-up)` sets them all for the service.
	fmt.Printf("KUBECONFIG=%s\nSP_K8S_KUBECONFIG=%s\nSP_NATS_URL=%s\nDCM_REGISTRATION_URL=%s\n",
		c.Kubeconfig, c.Kubeconfig, peers.NATSURL, peers.RegistryURL)
	if node != nil {
		fmt.Printf("REGISTRY=%s\n", node.Registry)
		if err := exposePeers(node, peers); err != nil {
			c.Stop()
			return fmt.Errorf("making NATS and the registry reachable from pods: %w (the cluster was stopped again)", err)
		}
	}
	return nil
}

// exposePeers makes NATS and DCM's registry, on 127.0.0.1, reachable from the real node's
// pods at the bridge's address, says so, and prints the URLs a pod uses.
func exposePeers(node *harness.RealNode, peers *harness.Peers) error {
	var podURLs []string
	for _, raw := range []string{peers.NATSURL, peers.RegistryURL} {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			return fmt.Errorf("%s has no port", raw)
		}
		if u.Host, err = node.ExposeToPods(port); err != nil {
			return err
		}
		podURLs = append(podURLs, u.String())
	}
	fmt.Fprintf(os.Stderr, "sp-harness: pods on %s reach the apiserver through the kubernetes Service (in-cluster config from "+
		"their service account), NATS at %s and DCM's registry at %s (this machine only)\n", node.Name, podURLs[0], podURLs[1])
	fmt.Printf("POD_NATS_URL=%s\nPOD_DCM_REGISTRATION_URL=%s\n", podURLs[0], podURLs[1])
	return nil
}

// serveNATS is the NATS server of a background cluster (up starts it as a process of the
// cluster): it serves until SIGTERM.
func serveNATS(ctx context.Context, store string, port int) error {
	if store == "" || port == 0 {
		usage()
	}
	n, err := harness.StartNATSOn(store, port)
	if err != nil {
		return err
	}
	<-ctx.Done()
	n.Stop()
	return nil
}

func down(dir string) error {
	c, err := harness.Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "sp-harness: no cluster running from %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	var nodeErr error
	if n, err := harness.LoadRealNode(); err == nil && n.JoinedTo(c.Kubeconfig) {
		if nodeErr = n.Stop(); nodeErr == nil {
			fmt.Fprintf(os.Stderr, "sp-harness: stopped the real node %s and cleaned up after it\n", n.Name)
		}
	}
	c.Stop() // also cleans up after a real node of this cluster that crashed
	fmt.Fprintf(os.Stderr, "sp-harness: stopped the cluster, NATS and the registry in %s\n", dir)
	if nodeErr != nil {
		return fmt.Errorf("stopping the real node: %w (retry with: sp-harness clean-real-node)", nodeErr)
	}
	return nil
}

// pushImage puts an image into the registry of the machine's running real node, under
// the name pods will use.
func pushImage(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: sp-harness push-image SRC NAME (SRC: an OCI layout folder or an image tarball; NAME: the name pods use, e.g. docker.io/library/nginx:alpine)")
	}
	n, err := harness.LoadRealNode()
	if err != nil {
		return fmt.Errorf("no real node running (make cluster-up REAL_NODE=1 or make run REAL_NODE=1): %w", err)
	}
	local, err := n.PushImage(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sp-harness: pushed %s as %s; pods on %s pull it by the name %s\n", args[0], local, n.Name, args[1])
	return nil
}

// execWithCluster gives a whole command (e.g. `go test ./...`) one control plane, so all
// test packages share it, and stops it however the command ends.
// With realNode it also starts the run's one real node, shared by every test package
// (testenv.RealNode finds it); where the machine cannot run one, it says why and the
// tests that need one skip.
func execWithCluster(ctx context.Context, args []string, realNode bool) (int, error) {
	if len(args) == 0 {
		usage()
	}
	c, err := harness.Start(ctx, harness.Options{Progress: os.Stderr})
	if err != nil {
		return 0, err
	}
	defer c.Stop()
	env := append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	if realNode {
		unavailable := func(err error) {
			fmt.Fprintf(os.Stderr, "sp-harness: no real node in this run (tests that need one are skipped): %v\n", err)
			env = append(env, harness.RealNodeEnv+"=unavailable: "+err.Error())
		}
		if err := harness.RealNodeSupported(); err != nil {
			unavailable(err)
		} else if n, err := harness.StartRealNode(ctx, c, filepath.Join(c.Dir, "realnode"), os.Stderr); errors.Is(err, harness.ErrRealNodeBusy) {
			unavailable(err)
		} else if err != nil {
			return 0, fmt.Errorf("real node: %w", err)
		} else {
			defer func() {
				if err := n.Stop(); err != nil {
					fmt.Fprintf(os.Stderr, "sp-harness: stopping the real node: %v\n", err)
				}
			}()
			env = append(env, harness.RealNodeEnv+"="+n.Dir)
		}
	}
	fmt.Fprintf(os.Stderr, "KUBECONFIG=%s\n", c.Kubeconfig)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Ctrl-C reaches the child through the terminal; SIGTERM may not: pass it on.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err = <-done
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// deployService installs the service onto the harness cluster in KUBECONFIG (see package
// deploy) and says where it answers.
func deployService(ctx context.Context, o deploy.Options) error {
	o.Kubeconfig, o.NATSURL, o.RegistrationURL = os.Getenv("KUBECONFIG"), os.Getenv("SP_NATS_URL"), os.Getenv("DCM_REGISTRATION_URL")
	if o.Kubeconfig == "" || o.NATSURL == "" || o.RegistrationURL == "" || o.ImageRef == "" {
		return errors.New("deploy needs KUBECONFIG, SP_NATS_URL and DCM_REGISTRATION_URL (export $(make cluster-up REAL_NODE=1)) and -ref")
	}
	n, err := harness.LoadRealNode()
	if err != nil || !n.JoinedTo(o.Kubeconfig) {
		return fmt.Errorf("no real node in the cluster of %s (make cluster-up REAL_NODE=1): %v", o.Kubeconfig, err)
	}
	o.Out = os.Stderr
	in, err := deploy.Install(ctx, n, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sp-harness: %s is ready in namespace %s (%d pod(s), %s), its image %s pulled from %s\n",
		in.Release, in.Namespace, len(in.URLs), in.Took.Round(100*time.Millisecond), o.ImageRef, n.Registry)
	for _, u := range in.URLs {
		fmt.Fprintf(os.Stderr, "  %s/api/v1alpha1/containers   (health: %s/health)\n", u, u)
	}
	policies := "enforced by the real node's kube-network-policies"
	if err := n.EnforcesNetworkPolicy(); err != nil {
		policies = "NOT enforced: " + err.Error()
	}
	fmt.Fprintf(os.Stderr, "  containers go to namespace %s; the NetworkPolicies (provider's, containers') are %s\n", in.ContainersNamespace, policies)
	fmt.Fprintf(os.Stderr, "  remove it: %s\n", deploy.RemoveCommand)
	for _, u := range in.URLs {
		fmt.Printf("SP_URL=%s\n", u)
	}
	return nil
}
