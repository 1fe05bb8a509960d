package proc_test

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

func TestFreePortsAreDistinctAndFree(t *testing.T) {
	for _, n := range []int{1, 3, 16} {
		ports, err := proc.FreePorts(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != n {
			t.Fatalf("FreePorts(%d) gave %d ports", n, len(ports))
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if seen[p] {
				t.Errorf("FreePorts(%d): port %d twice", n, p)
			}
			seen[p] = true
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Errorf("port %d is not free: %v", p, err)
				continue
			}
			ln.Close()
		}
	}
	addr, err := proc.FreeAddr()
	if err != nil || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("FreeAddr = %q, %v", addr, err)
	}
}

// A tied child runs in its own process group and dies when its parent does; a detached
// one leads a session of its own.
func TestTieAndDetach(t *testing.T) {
	if os.Getenv("PROC_TEST_PARENT") == "1" {
		// The parent: start a tied sleeper, print its PID, and exit at once.
		cmd := exec.Command("sleep", "60")
		proc.Tie(cmd)
		if err := cmd.Start(); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		os.Exit(0)
	}
	cases := []struct {
		name    string
		set     func(*exec.Cmd)
		ownPGID bool
		ownSID  bool
	}{
		{"tied", proc.Tie, true, false},
		{"detached", proc.Detach, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "60")
			c.set(cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			pgid, _ := syscall.Getpgid(pid)
			sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
			if (pgid == pid) != c.ownPGID {
				t.Errorf("pgid %d, pid %d: own group = %v, want %v", pgid, pid, pgid == pid, c.ownPGID)
			}
			if (int(sid) == pid) != c.ownSID {
				t.Errorf("sid %d, pid %d: own session = %v, want %v", sid, pid, int(sid) == pid, c.ownSID)
			}
		})
	}
	t.Run("tied child dies with its parent", func(t *testing.T) {
		parent := exec.Command(os.Args[0], "-test.run=^TestTieAndDetach$")
		parent.Env = append(os.Environ(), "PROC_TEST_PARENT=1")
		out, err := parent.Output()
		if err != nil {
			t.Fatalf("parent: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("parent printed %q", out)
		}
		deadline := time.Now().Add(5 * time.Second)
		for syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("child %d still runs after its parent exited", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// zombie: killed, not reaped yet (its parent, gone, left it to init).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}
