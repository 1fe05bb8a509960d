// Command sp-chaos is `make chaos`: a seeded fault-injection run against two replicas of
// the real service, with an invariant checker (tools/devenv/chaos), writing
// reliability.md and reliability.json into the run folder's report/ (-out docs rewrites
// the committed docs/reliability.*). It exits 1 when an invariant was violated, 2 when
// the run itself failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/chaos"
)

func main() {
	seed := flag.Uint64("seed", 0, "seed of the schedule (0: a random one, printed)")
	duration := flag.Duration("duration", 3*time.Minute, "how long the schedule of operations and faults runs (then the world comes to rest and is checked)")
	out := flag.String("out", "", "folder for reliability.md and reliability.json (default: report/ in the run folder; -out docs/reports rewrites the committed report)")
	dir := flag.String("dir", ".harness/chaos", "run folder: history.jsonl, events.jsonl, final.json, plan.json, every log (emptied first)")
	recheck := flag.String("recheck", "", "only run the checks again on this finished run folder and rewrite the report")
	staleness := flag.Duration("max-staleness", chaos.DefaultMaxStaleness, "SP_K8S_MAX_STALENESS given to the replicas, and the bound of the check \"no stale 200\"")
	inject := flag.String("inject", "", "build the service with this bug, to show the checker catches it ("+chaos.Bugs()+")")
	flag.Parse()
	if *out == "" {
		// Outside the source tree unless asked: a run by hand must not rewrite the
		// committed docs/reliability.*.
		run := *dir
		if *recheck != "" {
			run = *recheck
		}
		*out = filepath.Join(run, "report")
	}

	var (
		rep *chaos.Report
		err error
	)
	if *recheck != "" {
		rep, err = chaos.Recheck(*recheck, *out)
	} else {
		if *seed == 0 {
			*seed = rand.Uint64N(1<<31) + 1 // short enough to type
		}
		fmt.Fprintf(os.Stderr, "sp-chaos: seed %d, duration %s (reproduce: make chaos SEED=%d CHAOS_FLAGS=-duration=%s)\n", *seed, *duration, *seed, *duration)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			s := <-sigs
			fmt.Fprintf(os.Stderr, "sp-chaos: %v received, stopping everything it started\n", s)
			cancel()
			<-sigs
			os.Exit(2) // a second signal: leave now (child processes die with this one)
		}()
		rep, err = chaos.Run(ctx, chaos.Options{Seed: *seed, Duration: *duration, Dir: *dir, Out: *out, Log: os.Stderr, Inject: *inject, MaxStaleness: *staleness})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sp-chaos:", err)
		os.Exit(2)
	}
	fmt.Println(rep.Markdown())
	fmt.Fprintf(os.Stderr, "sp-chaos: wrote %s/reliability.md and reliability.json\n", *out)
	if !rep.OK {
		fmt.Fprintf(os.Stderr, "sp-chaos: invariants violated with seed %d: %s\n", rep.Run.Seed, rep.Reproduce)
		os.Exit(1)
	}
}
