package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The node's cgroup tree: the kubelet's cgroupRoot and containerd's own cgroup, so every
// process of the node, shims and containers included, is found there after a crash.

// cgroupHierarchies are the mount points of the cgroup v1 hierarchies and/or the v2
// unified hierarchy.
func cgroupHierarchies() []string {
	var hs []string
	for _, m := range mountInfo() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			hs = append(hs, m.point)
		}
	}
	return hs
}

// makeCgroupRoot creates the node's cgroup in every hierarchy: the kubelet insists that
// its cgroupRoot exists. A new v1 cpuset cgroup has no CPUs or memory nodes until given
// its parent's.
func makeCgroupRoot() error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, realNodeCgroup)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if cur, err := os.ReadFile(filepath.Join(d, f)); err == nil && len(bytes.TrimSpace(cur)) == 0 {
				if parent, err := os.ReadFile(filepath.Join(h, f)); err == nil {
					_ = os.WriteFile(filepath.Join(d, f), parent, 0o644)
				}
			}
		}
		if ctrls, err := os.ReadFile(filepath.Join(d, "cgroup.controllers")); err == nil { // v2
			for c := range strings.FieldsSeq(string(ctrls)) {
				_ = os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+"+c), 0o644)
			}
		}
	}
	return nil
}

// removeCgroupTree removes the node's cgroups, deepest first (rmdir; cgroup folders hold
// no removable files), retrying while the last processes exit.
func removeCgroupTree(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var dirs []string
		for _, h := range cgroupHierarchies() {
			_ = filepath.WalkDir(filepath.Join(h, realNodeCgroup), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
		}
		if len(dirs) == 0 {
			return nil
		}
		sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
		var last error
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				last = fmt.Errorf("removing cgroup %s: %w", d, err)
			}
		}
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
}
