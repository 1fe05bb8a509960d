package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// natsLink is the connection status events go out on (SP_NATS_URL), a component: start
// dials it, run holds it until the provider stops. The service starts and serves while
// NATS is down (the client keeps reconnecting by itself) and events wait for it;
// whatever a (re)connected server's consumers missed is published again. It is the
// reporter's publisher.
type natsLink struct {
	url, name string // name: this client's, as the server shows it
	provider  string // the event source's provider name
	// republish is told on every (re)connection (status.Options.Republish).
	republish chan struct{}
	log       *slog.Logger

	conn *nats.Conn
	pub  atomic.Pointer[status.NATSPublisher]
}

func newNATSLink(url, clientName, provider string, log *slog.Logger) *natsLink {
	return &natsLink{url: url, name: clientName, provider: provider, republish: make(chan struct{}, 1), log: log}
}

func (n *natsLink) askRepublish() {
	select {
	case n.republish <- struct{}{}:
	default: // one is pending already
	}
}

// start connects. A server that cannot be reached is no error (the client retries in
// the background); a URL or option the client refuses is.
func (n *natsLink) start(context.Context) error {
	conn, err := nats.Connect(n.url,
		nats.Name(n.name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ConnectHandler(func(*nats.Conn) { n.askRepublish() }),
		nats.ReconnectHandler(func(*nats.Conn) {
			n.log.Info("NATS reconnected")
			n.askRepublish()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { n.log.Warn("NATS disconnected", "err", err) }),
	)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", n.url, err)
	}
	pub, err := status.NewNATSPublisher(conn, n.provider)
	if err != nil {
		conn.Close()
		return fmt.Errorf("publishing on %s: %w", n.url, err)
	}
	n.conn = conn
	n.pub.Store(pub)
	return nil
}

// run holds the connection until ctx ends, then closes it.
func (n *natsLink) run(ctx context.Context) error {
	<-ctx.Done()
	n.conn.Close()
	return nil
}

var errNATSNotStarted = errors.New("the NATS connection is not started")

// Publish sends one status event (status.Publisher). The reporter runs only after the
// connection is started.
func (n *natsLink) Publish(ctx context.Context, eventID, id string, st container.Status) (bool, error) {
	pub := n.pub.Load()
	if pub == nil {
		return false, errNATSNotStarted
	}
	return pub.Publish(ctx, eventID, id, st)
}
