package harness

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// Peers are the DCM parts beside a background cluster (make cluster-up), so the service
// run by hand (README, "Running the binary") has everything it talks to: NATS with
// JetStream and DCM's registry.
type Peers struct {
	NATSURL     string
	RegistryURL string
}

// StartPeers starts NATS and the registry as processes of the cluster, detached when it
// is, and records them in its state: Stop (make cluster-down) ends them with it. Their
// data (JetStream store, registry database) is kept in the cluster's folder across runs,
// like etcd's.
//
// The NATS server is embedded Go code (StartNATS), so it needs a process to live in that
// outlives this command: natsServer is a program that serves it when run as
// `natsServer serve-nats -store DIR -port N` (sp-harness). It is copied into the
// cluster's folder first, so rebuilding the program later does not hide the running
// server from Stop (which recognizes its processes by their executable).
func (c *Cluster) StartPeers(natsServer, registryBin string) (*Peers, error) {
	bin := filepath.Join(c.Dir, "nats-server")
	if err := copyExecutable(natsServer, bin); err != nil {
		return nil, fmt.Errorf("copying %s: %w", natsServer, err)
	}
	ports, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := startProcess("nats", bin, []string{"serve-nats", "-store", filepath.Join(c.Dir, "nats"), "-port", strconv.Itoa(ports[0])},
		c.Dir, c.detached)
	if err != nil {
		return nil, err
	}
	c.Processes = append(c.Processes, p)
	if err := c.saveState(); err != nil {
		return nil, err
	}
	if err := waitFor("NATS on "+addr, 15*time.Second, []*process{p}, func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}); err != nil {
		return nil, err
	}
	peers := &Peers{NATSURL: "nats://" + addr}
	r, err := NewRegistry(registryBin, filepath.Join(c.Dir, "registry"), peers.NATSURL, c.detached)
	if err != nil {
		return nil, err
	}
	err = r.Start()
	if r.proc != nil {
		c.Processes = append(c.Processes, r.proc)
		if serr := c.saveState(); err == nil {
			err = serr
		}
	}
	if err != nil {
		return nil, err
	}
	peers.RegistryURL = r.URL
	return peers, nil
}

// copyExecutable copies src to dst (replacing it), mode 0755.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".partial"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
