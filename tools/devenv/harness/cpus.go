package harness

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// SplitCPUs divides the machine's CPUs between the control plane (the upper half) and
// everything else (the lower half), as a cluster keeps its control plane on nodes of
// its own. With one CPU there is nothing to split: both are nil.
func SplitCPUs() (controlPlane, rest []int) {
	n := runtime.NumCPU()
	if n < 2 {
		return nil, nil
	}
	for c := range n {
		if c >= n/2 {
			controlPlane = append(controlPlane, c)
		} else {
			rest = append(rest, c)
		}
	}
	return controlPlane, rest
}

// PinSelf keeps this process, and every process it starts from now on, on cpus.
func PinSelf(cpus []int) error { return pin(os.Getpid(), cpus) }

// pin keeps every thread of process pid on cpus. A thread inherits its creator's CPUs,
// so one started while the others are being pinned may still have the old ones: pin
// passes over the threads until one pass finds all of them on cpus.
func pin(pid int, cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	var want unix.CPUSet
	for _, c := range cpus {
		want.Set(c)
	}
	for range 10 {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		changed := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			var have unix.CPUSet
			if unix.SchedGetaffinity(tid, &have) == nil && have == want {
				continue
			}
			// A thread that exited meanwhile is not an error.
			if err := unix.SchedSetaffinity(tid, &want); err != nil && err != unix.ESRCH {
				return fmt.Errorf("pinning thread %d of %d to CPUs %v: %w", tid, pid, cpus, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("pinning process %d to CPUs %v: its threads kept changing", pid, cpus)
}
