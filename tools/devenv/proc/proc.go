package proc

import (
	"fmt"
	"net"
	"os/exec"
	"syscall"
)

// Tie makes cmd, not started yet, a child that dies with this process: the kernel sends
// it SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG; Go only ends a
// thread that a goroutine locked and left, which the tooling never does), so a test
// binary or tool that is killed never leaves a control plane or a service behind. The
// child gets a process group of its own: stopping it can signal everything it started
// (kill(-pid)), and a terminal's Ctrl-C goes to the tool only, which then stops its
// children in order.
func Tie(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Detach makes cmd, not started yet, outlive this process (make cluster-up): a session
// of its own, so neither this process's exit nor the terminal reaches it. It is stopped
// later by PID.
func Detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// FreePorts finds n distinct free loopback ports: it listens on 127.0.0.1:0 n times and
// releases them all at once, for the caller to hand to the processes it starts (another
// process may take one meanwhile; the harness's callers retry nothing, the window is
// short). Holding all n until the end is what keeps them distinct.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreeAddr is one free loopback address, host:port (see FreePorts).
func FreeAddr() (string, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}
