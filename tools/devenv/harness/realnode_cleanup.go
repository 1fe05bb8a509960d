package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Clean-up must work after any crash: the kubelet and containerd die with a killed test
// binary (PR_SET_PDEATHSIG), but containerd's shims are daemons and keep the pods
// running, and the bridge, mounts, sysctls and iptables chains stay. So everything here is
// found from fixed harness-owned places (our cgroup tree, our state folders, our socket)
// plus the record of what the host looked like before; nothing is found by a program's
// name, and nothing of a system containerd or kubelet is touched.

// hostState is what the node changes on the host, recorded before it starts.
type hostState struct {
	// Sysctls the kubelet (kernel.panic, vm.overcommit_memory...), the bridge plugin
	// (net.ipv4.ip_forward) and the NetworkPolicy enforcer's start
	// (net.bridge.bridge-nf-call-iptables) set.
	Sysctls map[string]string `json:"sysctls"`
	// IPTables holds, per "command table", the chains that existed: the kubelet adds
	// KUBE-* chains (KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT...).
	IPTables map[string][]string `json:"iptables"`
	// Existed says which shared folders existed: those the node created are removed when
	// empty again.
	Existed map[string]bool `json:"existed"`
}

var realNodeSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward",
	bridgeNFCallIPTables, // set by the NetworkPolicy enforcer's start
}

// Shared folders the node's programs create outside its own: libcni's cache, the
// kubelet's /var/log/containers symlinks, the shims' sockets (containerd 1.6 always puts
// them in /run/containerd/s), the kubelet's device-plugin socket and checkpoint (a
// hard-coded /var/lib/kubelet/device-plugins, whatever --root-dir says), libmount's
// /run/mount.
const (
	cniCacheDir      = "/var/lib/cni"
	containerLogsDir = "/var/log/containers"
	shimSocketDir    = "/run/containerd/s"
	systemKubeletDir = "/var/lib/kubelet"
	devicePluginDir  = "/var/lib/kubelet/device-plugins"
)

// sharedDirs, parents before children.
var sharedDirs = []string{cniCacheDir, filepath.Join(cniCacheDir, "results"), containerLogsDir, "/run/containerd",
	shimSocketDir, systemKubeletDir, devicePluginDir, "/run/mount"}

var iptablesTables = []string{"filter", "nat", "mangle"}

func recordHost() hostState {
	h := hostState{Sysctls: map[string]string{}, IPTables: map[string][]string{}, Existed: map[string]bool{}}
	for _, s := range realNodeSysctls {
		if b, err := os.ReadFile(sysctlPath(s)); err == nil {
			h.Sysctls[s] = strings.TrimSpace(string(b))
		}
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, t := range iptablesTables {
			if chains, err := iptablesChains(cmd, t); err == nil {
				h.IPTables[cmd+" "+t] = chains
			}
		}
	}
	for _, d := range sharedDirs {
		_, err := os.Stat(d)
		h.Existed[d] = err == nil
	}
	return h
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// cleanupRealNode removes everything a real node leaves, whether it was stopped or
// crashed: processes in its cgroups and shims of its socket, mounts under its folders,
// the harness's pod network chains, the bridge and its veths, the kubelet's iptables
// chains, changed sysctls, files in
// shared folders, its folders and cgroups. The record (kept until everything else
// succeeded) says what to restore; without one only harness-owned things are removed.
func cleanupRealNode(ctx context.Context, out io.Writer) error {
	rec, _ := loadRecord()
	var errs []error
	if rec != nil {
		for _, p := range []*process{rec.Kubelet, rec.Containerd, rec.ImageRegistry} {
			if p != nil {
				p.stop(5 * time.Second)
			}
		}
	}
	sockets, sandboxes := shimSockets(), containerIDs()
	if err := killRealNodeProcesses(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(realNodeLib, realNodeRun); err != nil {
		errs = append(errs, err)
	}
	if err := removePodNetwork(rec); err != nil {
		errs = append(errs, err)
	}
	if err := removeNetworkPolicies(rec); err != nil {
		errs = append(errs, err)
	}
	if rec != nil {
		if err := deleteBridge(); err != nil {
			errs = append(errs, err)
		}
		if err := restoreIPTables(rec.Host.IPTables); err != nil {
			errs = append(errs, err)
		}
		for name, v := range rec.Host.Sysctls {
			if b, err := os.ReadFile(sysctlPath(name)); err == nil && strings.TrimSpace(string(b)) == v {
				continue
			}
			if err := os.WriteFile(sysctlPath(name), []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring sysctl %s=%s: %w", name, v, err))
			}
		}
	}
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	// libcni's result cache: <network>-<container id>-<interface>, for our network and
	// for containerd's loopback network of our sandboxes.
	caches, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", realNodeNetwork+"-*"))
	for _, id := range sandboxes {
		more, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", "*-"+id+"-*"))
		caches = append(caches, more...)
	}
	for _, c := range caches {
		_ = os.Remove(c)
	}
	if links, err := os.ReadDir(containerLogsDir); err == nil {
		for _, l := range links {
			p := filepath.Join(containerLogsDir, l.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, podLogsDir+"/") {
				_ = os.Remove(p)
			}
		}
	}
	if rec != nil && !rec.Host.Existed[devicePluginDir] {
		// Created by our kubelet (StartRealNode refuses to run beside another kubelet), so
		// everything in it is the kubelet's socket and checkpoint.
		if entries, err := os.ReadDir(devicePluginDir); err == nil {
			for _, e := range entries {
				_ = os.Remove(filepath.Join(devicePluginDir, e.Name()))
			}
		}
	}
	if rec != nil {
		for i := len(sharedDirs) - 1; i >= 0; i-- { // children before parents
			if d := sharedDirs[i]; !rec.Host.Existed[d] {
				_ = os.Remove(d) // only when empty: whatever else is there is not ours
			}
		}
	}
	if err := removeCgroupTree(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		// Keep the record: the next start or clean-up tries again.
		return errors.Join(errs...)
	}
	if mounts := mountsUnder(realNodeLib, realNodeRun); len(mounts) > 0 {
		return fmt.Errorf("still mounted: %v", mounts)
	}
	for _, d := range []string{realNodeLib, realNodeRun} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	if rec != nil && len(errs) == 0 {
		fmt.Fprintln(out, "harness: real node stopped and cleaned up")
	}
	return errors.Join(errs...)
}

// shimSockets are the sockets of our shims, read from the task bundles' "address" files
// (unix:///run/containerd/s/<sha256>); a killed shim leaves its socket behind.
func shimSockets() []string {
	files, _ := filepath.Glob(filepath.Join(containerdState, "io.containerd.runtime.v2.task", "*", "*", "address"))
	var socks []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://")
		if strings.HasPrefix(s, shimSocketDir+"/") {
			socks = append(socks, s)
		}
	}
	return socks
}

// containerIDs are the IDs of our containers and sandboxes, from our runc and containerd
// state folders.
func containerIDs() []string {
	var ids []string
	for _, pattern := range []string{
		filepath.Join(runcRoot, "*", "*"),
		filepath.Join(containerdState, "io.containerd.runtime.v2.task", "*", "*"),
		filepath.Join(containerdState, "io.containerd.grpc.v1.cri", "sandboxes", "*"),
	} {
		dirs, _ := filepath.Glob(pattern)
		for _, d := range dirs {
			if id := filepath.Base(d); len(id) == 64 { // containerd's IDs are 64 hex digits
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// killRealNodeProcesses SIGKILLs, by PID, every process in the node's cgroup tree
// (containerd, its shims, every container) and any shim still serving our containerd
// socket, until none is left.
func killRealNodeProcesses(ctx context.Context) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids := realNodePIDs()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("real node processes still running after SIGKILL: %v", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func realNodePIDs() []int {
	self := os.Getpid()
	set := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, realNodeCgroup), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for f := range strings.FieldsSeq(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					set[pid] = true
				}
			}
			return nil
		})
	}
	// A shim that escaped the cgroup (started before containerd moved itself there):
	// its command line names our socket.
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == containerdSocket {
				set[pid] = true
			}
		}
	}
	var pids []int
	for pid := range set {
		if pid > 1 && pid != self && pidAlive(pid) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}
