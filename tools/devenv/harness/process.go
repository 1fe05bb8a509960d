package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// process is one control-plane program started by the harness. Its output goes to a log
// file beside the cluster's other state, which is where to look when something fails.
type process struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	Log  string `json:"log"`
	Bin  string `json:"bin"`

	cmd    *exec.Cmd
	exited chan struct{}
}

// startProcess runs bin tied to this process (proc.Tie: a test binary that is killed
// never leaves a control plane behind) or, detached, outliving it (proc.Detach: make
// cluster-up), stopped by PID later.
func startProcess(name, bin string, args []string, dir string, detached bool, env ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	if detached {
		proc.Detach(cmd)
	} else {
		proc.Tie(cmd)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{Name: name, PID: cmd.Process.Pid, Log: logPath, Bin: bin, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// running reports whether a started process has not exited yet.
func (p *process) running() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	// A process known only from a state file: make sure the PID still is our program
	// and not an unrelated process that reused the number.
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID)); err != nil || exe != p.Bin {
		return false
	}
	return pidAlive(p.PID)
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and waits for exit.
func (p *process) stop(grace time.Duration) {
	if p.PID <= 0 || !p.running() {
		return
	}
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	if p.waitExit(grace) {
		return
	}
	_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	p.waitExit(5 * time.Second)
}

func (p *process) waitExit(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.running() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return !p.running()
}

// logTail is the end of a process log, for error messages.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pidAlive is true for a live process that is not a zombie.
func pidAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 of /proc/PID/stat is the state; Z is a zombie waiting for its parent.
	if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// waitFor polls check until it returns nil, the deadline passes, or a watched process
// exits (then its log tail explains why).
func waitFor(what string, timeout time.Duration, watch []*process, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		for _, p := range watch {
			if !p.running() {
				return fmt.Errorf("%s exited while waiting for %s; last log lines:\n%s", p.Name, what, p.logTail(30))
			}
		}
		if last = check(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("timed out after %s waiting for %s", timeout, what), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
