package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// These tests run the built binary and need nothing else; the ones that need a control
// plane, NATS or the registry are in tools/devenv/e2e/binary.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the real k8s-container-sp once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sp-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "k8s-container-sp")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestBadConfigurationStopsWithAClearMessage(t *testing.T) {
	cmd := exec.Command(binary(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SP_K8S_EXTERNAL_SVC_TYPE=Ingress"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	exit, ok := err.(*exec.ExitError)
	if !ok || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2", err)
	}
	for _, want := range []string{"SP_NAME", "SP_ENDPOINT", "DCM_REGISTRATION_URL", "SP_NATS_URL"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("message does not name %s: %s", want, stderr.String())
		}
	}
}

// A kubeconfig the service's user cannot read (DCM's compose mounts the host's, mode
// 0600 and owned by the host user, into a container running as uid 65532) stops it with
// one line naming the path, the process's uid and gid, the file's mode and owner, and
// the fix.
func TestUnreadableKubeconfigIsOneClearLine(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the binary as another user")
	}
	bin := binary(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sp-kc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(kc, 1000, 1000); err != nil { // the host user's file
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"SP_NAME=sp", "SP_ENDPOINT=http://127.0.0.1:1", "DCM_REGISTRATION_URL=http://127.0.0.1:1/api",
		"SP_NATS_URL=nats://127.0.0.1:1", "SP_K8S_KUBECONFIG=" + kc, "AUTOMEMLIMIT=off"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2; stderr: %s", err, stderr.String())
	}
	out := strings.TrimSpace(stderr.String())
	t.Log(out)
	if strings.Count(out, "\n") != 0 {
		t.Errorf("want one line, got:\n%s", out)
	}
	for _, want := range []string{kc, "permission denied", "mode 0600 owned by uid 1000 gid 1000",
		"runs as uid 65532 gid 65532", "chmod 0644", `README "Install > Compose"`} {
		if !strings.Contains(out, want) {
			t.Errorf("message does not say %q: %s", want, out)
		}
	}
}

// The Go runtime's memory limit follows the container's: 90% of the cgroup's memory
// limit, with no GOMEMLIMIT set by the operator.
func TestGoMemoryLimitFollowsTheCgroup(t *testing.T) {
	dir := "/sys/fs/cgroup/memory/sp-memlimit-test"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup (cgroup v1 memory controller, root needed): %v", err)
	}
	defer os.Remove(dir)
	if err := os.WriteFile(dir+"/memory.limit_in_bytes", []byte("268435456"), 0o644); err != nil {
		t.Skipf("cannot limit the cgroup: %v", err)
	}
	// The shell joins the cgroup, then becomes the service (which stops at once: no
	// kubeconfig), so the limit is in place before the Go runtime starts.
	cmd := exec.Command("sh", "-c", "echo $$ > "+dir+"/cgroup.procs && exec "+binary(t))
	cmd.Env = []string{"SP_NAME=sp", "SP_ENDPOINT=http://127.0.0.1:1", "DCM_REGISTRATION_URL=http://127.0.0.1:1/api",
		"SP_NATS_URL=nats://127.0.0.1:1", "SP_K8S_KUBECONFIG=/nonexistent"}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), `"msg":"Go memory limit","bytes":241591910`) { // 0.9 * 256 MiB
		t.Errorf("no memory limit from the cgroup:\n%s", out)
	}
}

// The collector's target is 50 unless GOGC is set, and the log says which.
func TestGoCollectorTarget(t *testing.T) {
	base := []string{"SP_NAME=sp", "SP_ENDPOINT=http://127.0.0.1:1", "DCM_REGISTRATION_URL=http://127.0.0.1:1/api",
		"SP_NATS_URL=nats://127.0.0.1:1", "SP_K8S_KUBECONFIG=/nonexistent", "SP_LOG_LEVEL=debug"}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, `"level":"DEBUG","msg":"Go collector","gogc":50,"from":"the provider's default"`},
		{[]string{"GOGC=100"}, `"msg":"Go collector","gogc":"100","from":"GOGC"`},
	} {
		cmd := exec.Command(binary(t))
		cmd.Env = append(append([]string{}, base...), c.env...)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("with %v: the log does not say %s:\n%s", c.env, c.want, out)
		}
	}
}
