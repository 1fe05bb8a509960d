// Command sp-harness runs the project's test control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok on 127.0.0.1).
//
//	sp-harness build               build the binaries into the cache (once per version)
//	sp-harness up   [-dir DIR]     start a cluster in the background, print KUBECONFIG=...
//	sp-harness down [-dir DIR]     stop the cluster started by up, by PID
//	sp-harness exec -- CMD ARGS... start a cluster, run CMD with KUBECONFIG set, stop it
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dcm-project/k8s-container-sp/internal/devenv/harness"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", filepath.Join(".harness", "cluster"), "state folder of a background cluster (up/down)")
	_ = fs.Parse(os.Args[2:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	code := 0
	switch os.Args[1] {
	case "build":
		_, err = harness.EnsureBinaries(ctx, os.Stderr)
	case "up":
		err = up(ctx, *dir)
	case "down":
		err = down(*dir)
	case "exec":
		code, err = execWithCluster(ctx, fs.Args())
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
	fmt.Fprintln(os.Stderr, "usage: sp-harness build | up [-dir DIR] | down [-dir DIR] | exec -- CMD [ARGS...]")
	os.Exit(2)
}

func up(ctx context.Context, dir string) error {
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
	fmt.Printf("KUBECONFIG=%s\n", c.Kubeconfig)
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
	c.Stop()
	fmt.Fprintf(os.Stderr, "sp-harness: stopped the cluster in %s\n", dir)
	return nil
}

// execWithCluster gives a whole command (e.g. `go test ./...`) one control plane, so all
// test packages share it, and stops it however the command ends.
func execWithCluster(ctx context.Context, args []string) (int, error) {
	if len(args) == 0 {
		usage()
	}
	c, err := harness.Start(ctx, harness.Options{Progress: os.Stderr})
	if err != nil {
		return 0, err
	}
	defer c.Stop()
	fmt.Fprintf(os.Stderr, "KUBECONFIG=%s\n", c.Kubeconfig)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
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
