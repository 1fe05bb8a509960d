package harness

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS is an embedded nats-server with JetStream on a loopback port. Stop and Start
// keep the port and the JetStream store, so a test can simulate an outage and a restart.
type NATS struct {
	URL      string
	port     int
	storeDir string
	srv      *server.Server
}

// StartNATS starts a server on a random loopback port with JetStream storing in storeDir.
func StartNATS(storeDir string) (*NATS, error) { return StartNATSOn(storeDir, server.RANDOM_PORT) }

// StartNATSOn is StartNATS on a given loopback port.
func StartNATSOn(storeDir string, port int) (*NATS, error) {
	if port > 0 {
		// The server only says it is not ready; say why when it is this.
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return nil, fmt.Errorf("NATS: %w", err)
		}
		ln.Close()
	}
	n := &NATS{storeDir: storeDir, port: port}
	if err := n.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// Start (re)starts the server; after the first start it reuses the same port.
func (n *NATS) Start() error {
	if n.srv != nil && n.srv.Running() {
		return nil
	}
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      n.port,
		JetStream: true,
		StoreDir:  n.storeDir,
		NoSigs:    true,
		NoLog:     true,
		// Small limits: tests never need much, and two servers may share the machine.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  256 << 20,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return errors.New("nats-server not ready for connections within 10s")
	}
	n.srv = srv
	n.port = srv.Addr().(*net.TCPAddr).Port
	n.URL = fmt.Sprintf("nats://127.0.0.1:%d", n.port)
	return nil
}

// Stop shuts the server down (an outage); Start brings it back on the same URL.
func (n *NATS) Stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}
