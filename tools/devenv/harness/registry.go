package harness

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// Registry is DCM's service-provider-manager running on loopback with SQLite, consuming
// status events from a NATS server with JetStream. Stop and Start keep its port and
// database, so a test can take it away and bring it back.
type Registry struct {
	// URL is the API base, e.g. http://127.0.0.1:PORT/api/v1alpha1.
	URL string

	bin, dir, natsURL string
	port              int
	detached          bool
	proc              *process
}

// NewRegistry prepares a registry on a free loopback port with its data in dir, without
// starting it (its URL is known at once). It health-checks providers every second (DCM's
// default is 10 s) so tests do not wait.
func NewRegistry(bin, dir, natsURL string, detached bool) (*Registry, error) {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &Registry{bin: bin, dir: dir, natsURL: natsURL, port: ports[0], detached: detached}
	r.URL = fmt.Sprintf("http://127.0.0.1:%d/api/v1alpha1", r.port)
	return r, nil
}

// StartRegistry is NewRegistry and Start.
func StartRegistry(bin, dir, natsURL string, detached bool) (*Registry, error) {
	r, err := NewRegistry(bin, dir, natsURL, detached)
	if err != nil {
		return nil, err
	}
	return r, r.Start()
}

// DB is the registry's SQLite database file.
func (r *Registry) DB() string { return filepath.Join(r.dir, "registry.db") }

// Start (re)starts the registry and waits until it answers.
func (r *Registry) Start() error {
	if r.proc != nil && r.proc.running() {
		return nil
	}
	p, err := startProcess("registry", r.bin, nil, r.dir, r.detached,
		"DB_TYPE=sqlite",
		"DB_NAME="+r.DB(),
		"SVC_ADDRESS=127.0.0.1:"+strconv.Itoa(r.port),
		"SVC_LOG_LEVEL=debug",
		"NATS_URL="+r.natsURL,
		"HEALTH_CHECK_INTERVAL=1s",
		"HEALTH_CHECK_TIMEOUT=1s",
		"HEALTH_CHECK_BASE_BACKOFF_INTERVAL=500ms",
		"HEALTH_CHECK_MAX_BACKOFF_INTERVAL=2s",
	)
	if err != nil {
		return err
	}
	r.proc = p
	return waitFor("registry health", 30*time.Second, []*process{p}, func() error {
		return httpOK(http.DefaultClient, r.URL+"/health", "")
	})
}

// Stop ends the registry process.
func (r *Registry) Stop() {
	if r.proc != nil {
		r.proc.stop(5 * time.Second)
	}
}

// Log is the registry's log file.
func (r *Registry) Log() string { return filepath.Join(r.dir, "registry.log") }
