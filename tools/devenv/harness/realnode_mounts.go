package harness

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Mounts under the node's folders (container root filesystems, pod network namespaces,
// the kubelet's volumes) are found in /proc/self/mountinfo and unmounted deepest first.

type mount struct{ point, fstype string }

// mountInfo parses /proc/self/mountinfo: field 5 is the mount point (octal escapes for
// spaces and such), the field after " - " the filesystem type.
func mountInfo() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, typ := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(typ) < 1 {
			continue
		}
		ms = append(ms, mount{point: unescapeMount(fields[4]), fstype: typ[0]})
	}
	return ms
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder lists mount points at or below the given folders, deepest first.
func mountsUnder(dirs ...string) []string {
	var ps []string
	for _, m := range mountInfo() {
		for _, d := range dirs {
			if m.point == d || strings.HasPrefix(m.point, d+"/") {
				ps = append(ps, m.point)
				break
			}
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return strings.Count(ps[i], "/") > strings.Count(ps[j], "/") })
	return ps
}

// unmountUnder unmounts everything below dirs: containers' root filesystems, pod network
// namespaces, sandbox /dev/shm, the kubelet's volumes. Stacked mounts need several rounds;
// a busy one is detached (MNT_DETACH) so it goes once its last user does.
func unmountUnder(dirs ...string) error {
	for range 10 {
		ms := mountsUnder(dirs...)
		if len(ms) == 0 {
			return nil
		}
		for _, m := range ms {
			if err := syscall.Unmount(m, 0); err != nil {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	if ms := mountsUnder(dirs...); len(ms) > 0 {
		return fmt.Errorf("could not unmount %v", ms)
	}
	return nil
}
