package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// The machine-wide record of the real node (/run/sp-harness-realnode/node.json) and the
// lock around it: any process (a test binary, sp-harness down, the next run) finds the
// node's PIDs and the host state to restore there, by PID and path, never by name.

// checkNotBusy fails with ErrRealNodeBusy when another real node's processes still run.
func checkNotBusy() error {
	rec, err := loadRecord()
	if err != nil {
		return nil
	}
	if pids := rec.runningPIDs(); len(pids) > 0 {
		return fmt.Errorf("%w (state %s, PIDs %v, cluster %s): stop it first (make cluster-down, or sp-harness clean-real-node)",
			ErrRealNodeBusy, rec.Dir, pids, rec.Kubeconfig)
	}
	return nil
}

func (r *realNodeRecord) runningPIDs() []int {
	var pids []int
	for _, p := range []*process{r.Kubelet, r.Containerd, r.ImageRegistry, r.NetworkPolicies} {
		if p != nil && p.running() {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// LoadRealNode returns the real node running on this machine (started by any process),
// or an error wrapping os.ErrNotExist when there is none.
func LoadRealNode() (*RealNode, error) {
	n, err := recordedRealNode()
	if err != nil {
		return nil, err
	}
	if len(n.rec.runningPIDs()) == 0 {
		return nil, fmt.Errorf("the real node of %s is not running: %w", n.Dir, os.ErrNotExist)
	}
	return n, nil
}

// recordedRealNode is the node the machine's record describes, running or crashed.
func recordedRealNode() (*RealNode, error) {
	rec, err := loadRecord()
	if err != nil {
		return nil, err
	}
	return &RealNode{Name: RealNodeName, Dir: rec.Dir, Kubeconfig: rec.Kubeconfig, Socket: containerdSocket,
		KubeletPort: rec.KubeletPort, HealthzPort: rec.HealthzPort, Registry: rec.Registry, rec: *rec, out: io.Discard}, nil
}

// RealNodeEnv tells test binaries about the run's real node: `sp-harness exec -real-node`
// sets it to the node's folder, or to "unavailable: <reason>" when none could be started
// (then tests that need one are skipped with that reason).
const RealNodeEnv = "SP_HARNESS_REAL_NODE"

// JoinedTo reports whether the node's kubelet talks to the cluster kubeconfig names (the
// same API server), whatever path the kubeconfig is read from.
func (n *RealNode) JoinedTo(kubeconfig string) bool {
	// Server and credential: a later cluster may reuse a dead one's port.
	server := func(path string) string {
		cfg, err := (&Cluster{Kubeconfig: path}).RESTConfig()
		if err != nil {
			return ""
		}
		return cfg.Host + " " + cfg.BearerToken
	}
	a := server(n.Kubeconfig)
	return a != "" && a == server(kubeconfig)
}

func (n *RealNode) save() error {
	b, err := json.MarshalIndent(&n.rec, "", "  ")
	if err != nil {
		return err
	}
	tmp := recordFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, recordFile)
}

// reload picks up changes another process made (a kubelet it restarted), keeping this
// process's own handles on the processes it started (they know when their child exits).
func (n *RealNode) reload() {
	rec, err := loadRecord()
	if err != nil {
		return
	}
	keep := func(mine, theirs *process) *process {
		if mine != nil && theirs != nil && mine.PID == theirs.PID && mine.exited != nil {
			return mine
		}
		return theirs
	}
	rec.Kubelet = keep(n.rec.Kubelet, rec.Kubelet)
	rec.Containerd = keep(n.rec.Containerd, rec.Containerd)
	rec.ImageRegistry = keep(n.rec.ImageRegistry, rec.ImageRegistry)
	rec.NetworkPolicies = keep(n.rec.NetworkPolicies, rec.NetworkPolicies)
	n.rec = *rec
}

func loadRecord() (*realNodeRecord, error) {
	b, err := os.ReadFile(recordFile)
	if err != nil {
		return nil, err
	}
	rec := &realNodeRecord{}
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("%s: %w", recordFile, err)
	}
	return rec, nil
}

// lockRealNode serialises starting, stopping and cleaning the machine's real node
// between processes (parallel test binaries, sp-harness commands).
func lockRealNode() (func(), error) {
	dir := "/run/lock"
	if _, err := os.Stat(dir); err != nil {
		dir = os.TempDir()
	}
	return lockFile(filepath.Join(dir, "sp-harness-realnode.lock"))
}

// sbinDirs hold the system programs (ip, iptables, mount) that containerd, the kubelet,
// the CNI plugins and the clean-up run; a root PATH without them is not unusual (su).
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin"}

// sbinPath is PATH for the node's processes, with the sbin folders added when missing.
func sbinPath() string {
	path := os.Getenv("PATH")
	have := filepath.SplitList(path)
	for _, d := range sbinDirs {
		if !slices.Contains(have, d) {
			path += string(filepath.ListSeparator) + d
		}
	}
	return "PATH=" + path
}

// findCmd is exec.LookPath that also looks in the sbin folders.
func findCmd(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, d := range sbinDirs {
		if st, serr := os.Stat(filepath.Join(d, name)); serr == nil && st.Mode()&0o111 != 0 {
			return filepath.Join(d, name), nil
		}
	}
	return "", err
}

func lookPathResolved(name string) (string, error) {
	p, err := findCmd(name)
	if err != nil {
		return "", err
	}
	if p, err = filepath.Abs(p); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}
