// Command k8s-container-sp is the DCM Kubernetes Container Service Provider. All settings
// come from the environment (see README); a bad setting stops it at start with a message.
//
//	k8s-container-sp                  run the provider
//	k8s-container-sp release [-force] let go of every object it holds (see README
//	                                  "Uninstall / roll back"), workloads left running
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/dcm-project/k8s-container-sp/internal/app"
	"github.com/dcm-project/k8s-container-sp/internal/config"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// client-go logs (leader election, reflectors) go to the same JSON log.
	klog.SetSlogLogger(log)
	// The Go runtime's soft memory limit follows the container's (cgroup) limit, so the
	// heap's garbage stays below it without an operator-set GOMEMLIMIT.
	if limit, err := memlimit.Set(); err != nil {
		log.Info("Go memory limit not derived from a cgroup", "reason", err.Error())
	} else if limit < math.MaxInt64 {
		log.Info("Go memory limit", "bytes", limit, "from", "90% of the container's cgroup memory limit, or GOMEMLIMIT")
	}
	cfg, err := config.Load(os.Environ())
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-container-sp:", err)
		os.Exit(2)
	}
	rc, err := app.RESTConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-container-sp:", err)
		os.Exit(2)
	}
	if len(os.Args) > 1 && os.Args[1] == "release" {
		os.Exit(release(cfg, rc, os.Args[2:]))
	}
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "k8s-container-sp: unknown command %q (commands: release)\n", os.Args[1])
		os.Exit(2)
	}
	a, err := app.New(cfg, rc, version, log)
	if err != nil {
		log.Error("start-up failed", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx, nil); err != nil {
		log.Error("stopped with error", "err", err)
		os.Exit(1)
	}
}

func release(cfg *config.Config, rc *rest.Config, args []string) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	force := fs.Bool("force", false, "release even though a replica seems to be running")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Release(ctx, cfg, rc, *force, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "k8s-container-sp release:", err)
		return 1
	}
	return 0
}
