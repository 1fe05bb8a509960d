// Command k8s-container-sp is the DCM Kubernetes Container Service Provider. All settings
// come from the environment (--help lists them); a bad setting stops it at start with a
// message naming every bad variable, exit code 2.
//
//	k8s-container-sp                  run the provider
//	k8s-container-sp release [-force] let go of every object it holds, workloads left
//	                                  running (docs/operations.md, "Uninstall / roll back")
//	k8s-container-sp --help           commands, every setting, where to read on
//	k8s-container-sp --version        version and source revision
//
// --help, --version and release --help need no settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/caarlos0/env/v11"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/dcm-project/k8s-container-sp/internal/app"
	"github.com/dcm-project/k8s-container-sp/internal/buildinfo"
	"github.com/dcm-project/k8s-container-sp/internal/config"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3" (the Containerfile's
// VERSION build argument does it). Left "dev", the version Go stamped from the source
// checkout is shown instead (see buildinfo.Version).
var version = "dev"

// revision is the source commit, set at build time: -ldflags "-X main.revision=<sha>"
// (make image does it). Image builds use -buildvcs=false so the binary does not depend on
// the checkout's VCS state; without this, --version could not name the commit. Left
// empty, the revision Go stamped from the checkout is shown (see buildinfo.Version).
var revision = ""

const name = "k8s-container-sp"

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run is the command line: it returns the exit code (0 done, 1 failed, 2 bad usage or
// settings). Help and version are answered before any setting is read.
func run(args, environ []string, stdout, stderr io.Writer) int {
	cmd, rest := "", args
	if len(args) > 0 {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "-version", "--version":
		ver, detail := buildinfo.Version(version, revision)
		fmt.Fprintf(stdout, "%s %s\n%s\n", name, ver, detail)
		return 0
	case "", "release":
	default:
		fmt.Fprintf(stderr, "%s: unknown command or flag %q (commands: release; flags: --help, --version)\n", name, cmd)
		return 2
	}

	var force bool
	if cmd == "release" {
		fs := releaseFlags(&force)
		fs.SetOutput(io.Discard)
		switch err := fs.Parse(rest); {
		case errors.Is(err, flag.ErrHelp):
			releaseUsage(stdout, fs)
			return 0
		case err != nil:
			fmt.Fprintf(stderr, "%s release: %v\n", name, err)
			releaseUsage(stderr, fs)
			return 2
		case fs.NArg() > 0:
			fmt.Fprintf(stderr, "%s release: unexpected argument %q\n", name, fs.Arg(0))
			return 2
		}
	}

	cfg, err := config.Load(environ)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n(%s --help lists every setting)\n", name, err, name)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.Level()}))
	// client-go logs (leader election, reflectors) go to the same JSON log.
	klog.SetSlogLogger(log)
	warnUnknown(log, config.UnknownSettings(environ))
	// The Go runtime's soft memory limit follows the container's (cgroup) limit, so the
	// heap's garbage stays below it without an operator-set GOMEMLIMIT.
	if limit, err := memlimit.Set(); err != nil {
		log.Info("Go memory limit not derived from a cgroup", "reason", err.Error())
	} else if limit < math.MaxInt64 {
		log.Info("Go memory limit", "bytes", limit, "from", "90% of the container's cgroup memory limit, or GOMEMLIMIT")
	}
	// The heap is mostly the caches, which live as long as the process; Go's default
	// (GOGC=100) lets garbage grow to their size again before it collects. GOGC overrides.
	if gogc, set := env.ToMap(environ)["GOGC"]; set {
		log.Debug("Go collector", "gogc", gogc, "from", "GOGC")
	} else {
		debug.SetGCPercent(app.DefaultGOGC)
		log.Debug("Go collector", "gogc", app.DefaultGOGC, "from", "the provider's default")
	}
	rc, err := app.RESTConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd == "release" {
		return release(ctx, cfg, rc, force, stdout, stderr)
	}
	ver, _ := buildinfo.Version(version, revision)
	a, err := app.New(cfg, rc, ver, log)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return 1
	}
	if err := a.Run(ctx, nil); err != nil {
		log.Error("stopped with error", "err", err)
		return 1
	}
	return 0
}

// warnUnknown names, in one WARN line, the SP_ variables no setting reads, each with the
// setting it is nearest to: they are ignored, and the default in force may not be what
// the operator meant (DCM's environment agent sets SP_CONTAINER_NAMESPACE, which is
// SP_K8S_NAMESPACE here). Not an error: another program's variable may be in the
// environment too.
func warnUnknown(log *slog.Logger, unknown []config.Unknown) {
	if len(unknown) == 0 {
		return
	}
	names := make([]string, len(unknown))
	said := make([]string, len(unknown))
	for i, u := range unknown {
		names[i], said[i] = u.Name, u.Name
		if u.Nearest != "" {
			said[i] += " (did you mean " + u.Nearest + "?)"
		}
	}
	log.Warn(fmt.Sprintf("unknown settings, ignored: %s; %s --help lists every setting", strings.Join(said, ", "), name),
		"unknown", names)
}

func releaseFlags(force *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.BoolVar(force, "force", false, "release even though a replica seems to be running")
	return fs
}

func release(ctx context.Context, cfg *config.Config, rc *rest.Config, force bool, stdout, stderr io.Writer) int {
	if err := app.Release(ctx, cfg, rc, force, stdout); err != nil {
		fmt.Fprintf(stderr, "%s release: %v\n", name, err)
		return 1
	}
	return 0
}

// releaseAbout is release --help's description, one paragraph a string, wrapped at
// releaseWidth columns when printed.
var releaseAbout = []string{
	"Lets go of every object the provider holds in SP_K8S_NAMESPACE, so that it can be " +
		"uninstalled or rolled back. It deletes the provider's container records and its " +
		"leader election's ConfigMap. The records are deleted with orphan propagation: " +
		"every container's Deployment, pods and Service are left running, and the garbage " +
		"collector only takes off their ownerReferences to the records.",
	"It refuses while a replica seems to be running (one holds the leader election's " +
		"ConfigMap), unless -force is given.",
	"It reads the same settings as the provider (" + name + " --help lists them). " +
		`docs/operations.md, "Uninstall / roll back", says more.`,
}

const releaseWidth = 80

func releaseUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s release [-force]\n", name)
	for _, p := range releaseAbout {
		fmt.Fprintf(w, "\n%s", wrap(p, "", releaseWidth))
	}
	fmt.Fprintf(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usage is --help: the commands, every setting from config.Settings (so it cannot drift
// from what the provider reads), and where to read on.
func usage(w io.Writer) {
	fmt.Fprintf(w, `%[1]s: the DCM Kubernetes Container Service Provider. It serves DCM's container
API, runs each container as a Kubernetes Deployment (and a Service for its ports),
registers with the DCM registry and publishes status events on NATS.

Usage:
  %[1]s                    run the provider
  %[1]s release [-force]   before an uninstall or roll-back: let go of every
                                      object the provider holds, workloads keep running
                                      (release --help says more)
  %[1]s --help             this text
  %[1]s --version          version and source revision

Settings, from the environment. A missing or invalid one stops the provider at start with
one line per bad variable, exit code 2.
`, name)
	group := "-"
	for _, s := range config.Settings() {
		if s.Group != group {
			group = s.Group
			title := map[string]string{"": "Provider", "Monitor": "Status reporting"}[group]
			if title == "" {
				title = group
			}
			fmt.Fprintf(w, "\n  %s\n", title)
		}
		var facts []string
		switch {
		case s.Required:
			facts = append(facts, "required")
		case s.Default != "":
			facts = append(facts, fmt.Sprintf("default %q", s.Default))
		}
		if s.Unit != "" {
			facts = append(facts, s.Unit)
		}
		line := "    " + s.Name
		if len(facts) > 0 {
			line += " (" + strings.Join(facts, ", ") + ")"
		}
		fmt.Fprintf(w, "%s\n%s", line, wrap(s.Help, "        ", 88))
	}
	fmt.Fprintf(w, `
Read on: README.md in the source (github.com/dcm-project/k8s-container-sp) is the front
door (install, run, the API); docs/ has the reference: configuration, API and errors,
operations and metrics, security, reliability, architecture.
`)
}

// wrap fills text into lines of at most width columns, each starting with indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}
