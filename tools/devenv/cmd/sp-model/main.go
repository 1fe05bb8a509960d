// Command sp-model runs the in-process capacity model (make model): the service's real
// store, HTTP API and status controller fed by a list-watch server with 1,000 to
// 150,000 running containers, each size in a process of its own, and writes model.md
// and model.json (see tools/devenv/model).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/model"
)

func main() {
	sizes := flag.String("sizes", "1000,25000,100000", "container counts, comma-separated (the targets are read at 1,000 and 25,000; larger sizes are figures)")
	out := flag.String("out", "docs/reports", "folder for model.md and model.json")
	logs := flag.String("logs", filepath.Join(os.TempDir(), "sp-model"), "folder for each size's service log (model-<size>.log)")
	// The child: one size, the service alone in this process (see model.ChildMain).
	child := flag.Bool("child", false, "internal: measure one size and print it as JSON")
	size := flag.Int("size", 0, "internal (-child): containers")
	apiserver := flag.String("apiserver", "", "internal (-child): the model apiserver's URL")
	natsURL := flag.String("nats", "", "internal (-child): NATS URL")
	registry := flag.String("registry", "", "internal (-child): the registry's URL")
	logPath := flag.String("log", "", "internal (-child): the service's log file")
	cpuProfile := flag.String("cpuprofile", "", "internal (-child): write the service process's CPU profile here")
	profile := flag.String("profile", "", "sizes, comma-separated, whose service process writes a CPU profile and, idle, a heap profile (model-<size>.cpu.pprof and .heap.pprof in -logs)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *child {
		logf, err := os.Create(*logPath)
		if err != nil {
			fail(err)
		}
		defer logf.Close()
		if err := model.ChildMain(ctx, model.ServiceOptions{Size: *size, APIServer: *apiserver, NATS: *natsURL, Registry: *registry, Log: logf,
			CPUProfile: *cpuProfile},
			os.Stdin, os.Stdout); err != nil {
			fail(err)
		}
		return
	}

	ns, profiled := counts("sizes", *sizes), []int(nil)
	if *profile != "" {
		profiled = counts("profile", *profile)
	}
	exe, err := os.Executable()
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(*logs, 0o755); err != nil {
		fail(err)
	}
	r, err := model.Run(ctx, model.Options{Sizes: ns, Exe: exe, Dir: *logs, Progress: os.Stderr, Profile: profiled})
	if err != nil {
		fail(err)
	}
	r.Command = "sp-model -sizes " + *sizes
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "model.json"), append(js, '\n'), 0o644); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "model.md"), r.Markdown(), 0o644); err != nil {
		fail(err)
	}
	for _, c := range r.Checks() {
		verdict := "met"
		if !c.OK {
			verdict = "MISSED"
		}
		fmt.Fprintf(os.Stderr, "model: %s: %s (target %s): %s\n", c.What, c.Measured, c.Target, verdict)
	}
	fmt.Fprintf(os.Stderr, "model: wrote %s and %s\n", filepath.Join(*out, "model.md"), filepath.Join(*out, "model.json"))
}

// counts parses a comma-separated list of container counts (flag name).
func counts(name, list string) []int {
	var ns []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "sp-model: bad -%s %q\n", name, list)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	return ns
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sp-model:", err)
	os.Exit(1)
}
