package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The network state the node leaves on the host: the bridge and its veths, the kubelet's
// KUBE-* iptables chains, and the harness's own pod network (realnode_expose.go).

// deleteBridge deletes the veths on the node's bridge (a pod's veth usually goes with its
// network namespace, but not when the namespace is still mounted somewhere) and the
// bridge.
func deleteBridge() error {
	if _, err := os.Stat("/sys/class/net/" + RealNodeBridge); err != nil {
		return nil
	}
	links, _ := os.ReadDir("/sys/class/net")
	var errs []error
	for _, l := range links {
		if master, err := os.Readlink(filepath.Join("/sys/class/net", l.Name(), "master")); err == nil && filepath.Base(master) == RealNodeBridge {
			// A veth also goes away by itself once its pod's network namespace is gone.
			if err := deleteLink(l.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := deleteLink(RealNodeBridge); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteLink deletes a network interface; one that vanished meanwhile is fine.
func deleteLink(name string) error {
	ip, err := findCmd("ip")
	if err != nil {
		return err
	}
	out, err := exec.Command(ip, "link", "delete", name).CombinedOutput()
	if _, statErr := os.Stat("/sys/class/net/" + name); err != nil && statErr == nil {
		return fmt.Errorf("ip link delete %s: %v: %s", name, err, out)
	}
	return nil
}

// iptablesChains lists a table's chains (the "-N CHAIN" lines of `iptables -S`).
func iptablesChains(cmd, table string) ([]string, error) {
	out, err := iptables(cmd, table, "-S").Output()
	if err != nil {
		return nil, err
	}
	var chains []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if c, ok := strings.CutPrefix(l, "-N "); ok {
			chains = append(chains, strings.TrimSpace(c))
		}
	}
	return chains, nil
}

// restoreIPTables removes the KUBE-* chains that appeared since before (see removeChains).
func restoreIPTables(before map[string][]string) error {
	var errs []error
	for key, old := range before {
		cmd, table, _ := strings.Cut(key, " ")
		existed := map[string]bool{}
		for _, c := range old {
			existed[c] = true
		}
		now, err := iptablesChains(cmd, table)
		if err != nil {
			continue
		}
		added := map[string]bool{}
		for _, c := range now {
			if !existed[c] && strings.HasPrefix(c, "KUBE-") {
				added[c] = true
			}
		}
		if err := removeChains(cmd, table, added); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeChains deletes chains of a table: first the rules jumping to them from other
// chains, then their rules, then the chains.
func removeChains(cmd, table string, chains map[string]bool) error {
	if len(chains) == 0 {
		return nil
	}
	if rules, err := iptables(cmd, table, "-S").Output(); err == nil {
		for l := range strings.SplitSeq(string(rules), "\n") {
			args := splitIPTablesRule(l)
			if len(args) < 2 || args[0] != "-A" || chains[args[1]] {
				continue
			}
			for i := 0; i+1 < len(args); i++ {
				if (args[i] == "-j" || args[i] == "-g") && chains[args[i+1]] {
					args[0] = "-D"
					_ = iptables(cmd, table, args...).Run()
					break
				}
			}
		}
	}
	for c := range chains {
		_ = iptables(cmd, table, "-F", c).Run()
	}
	var errs []error
	for c := range chains {
		if out, err := iptables(cmd, table, "-X", c).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s -t %s -X %s: %v: %s", cmd, table, c, err, out))
		}
	}
	return errors.Join(errs...)
}

// iptables is an iptables or ip6tables command on one table, waiting up to 5 s for the
// xtables lock.
func iptables(cmd, table string, args ...string) *exec.Cmd {
	if p, err := findCmd(cmd); err == nil {
		cmd = p
	}
	return exec.Command(cmd, append([]string{"-w", "5", "-t", table}, args...)...)
}

// splitIPTablesRule splits an `iptables -S` line into arguments; only double quotes (as in
// comments) need handling.
func splitIPTablesRule(l string) []string {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range l {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case r == ' ' && !inQuote:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		args = append(args, cur.String())
	}
	return args
}
