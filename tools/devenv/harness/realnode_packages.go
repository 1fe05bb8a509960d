package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"
)

// realNodeNeeds maps what the real node runs to the Debian package providing it
// (containerd 1.6.20, runc 1.1.5 and containernetworking-plugins 1.1.1 on Debian 12).
var realNodeNeeds = map[string]string{
	"containerd":              "containerd",
	"containerd-shim-runc-v2": "containerd",
	"ctr":                     "containerd",
	"runc":                    "runc",
	"/usr/lib/cni/bridge":     "containernetworking-plugins",
	"/usr/lib/cni/host-local": "containernetworking-plugins",
	"/usr/lib/cni/loopback":   "containernetworking-plugins",
	"iptables":                "iptables",
	"conntrack":               "conntrack",
	"ip":                      "iproute2",
}

// missingPackages lists the Debian packages whose programs are not installed.
func missingPackages() []string {
	set := map[string]bool{}
	for file, pkg := range realNodeNeeds {
		var err error
		if filepath.IsAbs(file) {
			_, err = os.Stat(file)
		} else {
			_, err = findCmd(file)
		}
		if err != nil {
			set[pkg] = true
		}
	}
	pkgs := make([]string, 0, len(set))
	for p := range set {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	return pkgs
}

// ensureRealNodePackages installs the missing packages with apt-get (output in
// dir/apt.log). While it runs, a policy-rc.d that answers 101 ("not allowed") keeps the
// containerd package from starting a system containerd; one already there is left alone.
func ensureRealNodePackages(ctx context.Context, dir string, out io.Writer) error {
	missing := missingPackages()
	if len(missing) == 0 {
		return nil
	}
	// apt-get holds its own lock; this one keeps two harness runs from racing for it.
	unlock, err := lockRealNode()
	if err != nil {
		return err
	}
	defer unlock()
	if missing = missingPackages(); len(missing) == 0 {
		return nil
	}
	aptGet, err := findCmd("apt-get")
	if err != nil {
		return fmt.Errorf("%v missing and no apt-get to install them", missing)
	}
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\n# written by the k8s-container-sp harness while installing packages\nexit 101\n"), 0o755); err != nil {
			return err
		}
		defer os.Remove(policy)
	}
	logPath := filepath.Join(dir, "apt.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	start := time.Now()
	fmt.Fprintf(out, "harness: installing %v with apt-get for the real node (log: %s)\n", missing, logPath)
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, aptGet, append([]string{"-q", "-y", "-o", "DPkg::Lock::Timeout=300"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", sbinPath())
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %v: %w (see %s)", args, err, logPath)
		}
		return nil
	}
	if err := apt("update"); err != nil {
		return err
	}
	if err := apt(append([]string{"install"}, "containerd", "runc", "containernetworking-plugins", "iptables", "conntrack", "iproute2")...); err != nil {
		return err
	}
	if still := missingPackages(); len(still) > 0 {
		return fmt.Errorf("after apt-get install, still missing: %v (see %s)", still, logPath)
	}
	fmt.Fprintf(out, "harness: installed the real node's packages in %s\n", time.Since(start).Round(time.Second))
	return nil
}
