// Package natslink is the connection status events go out on.
package natslink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/redact"
	"github.com/dcm-project/k8s-container-sp/internal/secretfile"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// Link is the connection status events go out on (SP_NATS_URL), a component: Start
// dials it, Run holds it until the provider stops. The service starts and serves while
// NATS is down (the client keeps reconnecting by itself) and events wait for it;
// whatever a (re)connected server's consumers missed is published again. It is the
// controller's publisher.
//
// What it authenticates with comes from files (config.NATS), each followed like the API
// token: a credentials file and the TLS files are asked for at every (re)connection, so
// the next one uses what the files hold now; an NKey's public key is sent with every
// connection's CONNECT, so a seed file that now holds another key makes a new connection
// (within secretfile.Interval), which takes over once it is connected. A file that
// changes into something unusable is logged and the last good one kept.
//
// The URL is never logged or returned as given: redact.URL hides credentials in it.
type Link struct {
	url, name string // name: this client's, as the server shows it
	provider  string // the event source's provider name
	// republish is told on every (re)connection (status.Options.Republish).
	republish chan struct{}
	log       *slog.Logger

	// auth: options that follow their files (credentials, TLS), for every connection.
	auth []nats.Option
	// nkey is the NKey seed file's key; nil without SP_NATS_NKEY_SEED_FILE.
	nkey  *secretfile.Value[secretfile.NKey]
	every time.Duration // how often run looks at the NKey

	mu      sync.Mutex
	conn    *nats.Conn // under mu: the current connection
	connKey string     // under mu: the NKey public key conn was made with
	// pending, under mu: a connection made with a new NKey, not in use yet (followKey).
	pending    *nats.Conn
	pendingKey string
	pub        atomic.Pointer[status.NATSPublisher]
	// lastReconnectErr dedupes the failed-reconnect warning (one per distinct error).
	lastReconnectErr atomic.Pointer[string]
}

// Republish is told on every (re)connection (status.Options.Republish).
func (n *Link) Republish() <-chan struct{} { return n.republish }

// Connected reports whether the connection in use is up.
func (n *Link) Connected() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conn != nil && n.conn.IsConnected()
}

// New reads the files files names (an error names the file); it connects to nothing.
func New(url, clientName, provider string, files config.NATS, log *slog.Logger) (*Link, error) {
	return NewEvery(url, clientName, provider, files, secretfile.Interval, log)
}

// NewEvery is New looking at the files every every.
func NewEvery(url, clientName, provider string, files config.NATS, every time.Duration, log *slog.Logger) (*Link, error) {
	n := &Link{url: url, name: clientName, provider: provider, republish: make(chan struct{}, 1), log: log, every: every}
	if err := n.loadFiles(files); err != nil {
		return nil, err
	}
	return n, nil
}

// loadFiles makes the options that follow the files.
func (n *Link) loadFiles(f config.NATS) error {
	if f.CredsFile != "" {
		creds, err := secretfile.WatchCreds(f.CredsFile, n.every, n.log)
		if err != nil {
			return fmt.Errorf("SP_NATS_CREDS_FILE: %w", err)
		}
		// The JWT and the signature of one CONNECT come from the same read of the file.
		var last atomic.Pointer[secretfile.Creds]
		n.auth = append(n.auth, nats.UserJWT(func() (string, error) {
			c := creds.Get()
			last.Store(&c)
			return c.JWT, nil
		}, func(nonce []byte) ([]byte, error) {
			c := last.Load()
			if c == nil {
				cur := creds.Get()
				c = &cur
			}
			return c.Sign(nonce)
		}))
	}
	if f.NKeySeedFile != "" {
		k, err := secretfile.WatchNKey(f.NKeySeedFile, n.every, n.log)
		if err != nil {
			return fmt.Errorf("SP_NATS_NKEY_SEED_FILE: %w", err)
		}
		n.nkey = k
	}
	if !f.TLS() {
		return nil
	}
	var certCB nats.TLSCertHandler
	var rootsCB nats.RootCAsHandler
	if f.TLSCertFile != "" {
		pair, err := secretfile.WatchKeyPair("NATS client certificate", f.TLSCertFile, f.TLSKeyFile, n.every, n.log)
		if err != nil {
			return fmt.Errorf("SP_NATS_TLS_CERT_FILE / SP_NATS_TLS_KEY_FILE: %w", err)
		}
		certCB = func() (tls.Certificate, error) { return *pair.Get(), nil }
	}
	if f.TLSCAFile != "" {
		pool, err := secretfile.WatchCertPool("NATS CA", f.TLSCAFile, n.every, n.log)
		if err != nil {
			return fmt.Errorf("SP_NATS_TLS_CA_FILE: %w", err)
		}
		rootsCB = func() (*x509.CertPool, error) { return pool.Get(), nil }
	}
	// TLS 1.2 or later; the server must offer TLS (the client refuses a plain one).
	n.auth = append(n.auth, nats.ClientTLSConfig(certCB, rootsCB))
	return nil
}

func (n *Link) askRepublish() {
	select {
	case n.republish <- struct{}{}:
	default: // one is pending already
	}
}

// redacted is the URL fit for a log line or an error.
func (n *Link) redacted() string { return redact.URLs(n.url) }

// connect makes a connection with the files' current contents. A server that cannot be
// reached is no error (the client retries in the background); a URL or option the
// client refuses is.
func (n *Link) connect() (*nats.Conn, string, error) {
	opts := []nats.Option{
		nats.Name(n.name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ConnectHandler(func(c *nats.Conn) {
			n.log.Info("NATS connected", "server", redact.URL(c.ConnectedUrl()))
			n.askRepublish()
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			n.lastReconnectErr.Store(nil)
			n.log.Info("NATS reconnected", "server", redact.URL(c.ConnectedUrl()))
			n.askRepublish()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				n.log.Warn("NATS disconnected", "err", redact.Text(err.Error(), n.url))
			}
		}),
		// A failed attempt is logged once per distinct error (an expired certificate or a
		// refused key would otherwise be a line a second).
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			msg := redact.Text(err.Error(), n.url)
			if last := n.lastReconnectErr.Swap(&msg); last == nil || *last != msg {
				n.log.Warn("NATS connection attempt failed; retrying", "servers", n.redacted(), "err", msg)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			n.log.Warn("NATS error", "err", redact.Text(err.Error(), n.url))
		}),
	}
	opts = append(opts, n.auth...)
	var key string
	if n.nkey != nil {
		k := n.nkey.Get()
		key = k.Public
		opts = append(opts, nats.Nkey(k.Public, k.Sign))
	}
	conn, err := nats.Connect(n.url, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("connecting to %s: %w", n.redacted(), redact.Error(err, n.url))
	}
	return conn, key, nil
}

// start connects.
func (n *Link) Start(context.Context) error {
	conn, key, err := n.connect()
	if err != nil {
		return err
	}
	pub, err := status.NewNATSPublisher(conn, n.provider)
	if err != nil {
		conn.Close()
		return fmt.Errorf("publishing on %s: %w", n.redacted(), redact.Error(err, n.url))
	}
	n.mu.Lock()
	n.conn, n.connKey = conn, key
	n.mu.Unlock()
	n.pub.Store(pub)
	return nil
}

// Run holds the connection until ctx ends, then closes it. With an NKey seed file it
// looks at the key every interval, and connects anew when it is another one.
func (n *Link) Run(ctx context.Context) error {
	var tick <-chan time.Time
	if n.nkey != nil {
		t := time.NewTicker(n.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			n.mu.Lock()
			conn, pending := n.conn, n.pending
			n.mu.Unlock()
			if pending != nil {
				pending.Close()
			}
			conn.Close()
			return nil
		case <-tick:
			n.followKey()
		}
	}
}

// followKey connects anew when the NKey seed file holds another key than the current
// connection was made with. The new connection takes over once it is connected (or at
// once when the current one is not): a server that does not accept the new key yet
// keeps the old connection in use meanwhile. The old connection is then closed (a
// status event being sent on it fails and is retried on the new one).
func (n *Link) followKey() {
	key := n.nkey.Get().Public
	n.mu.Lock()
	current, pending, pendingKey := n.conn, n.pending, n.pendingKey
	n.mu.Unlock()
	if pending != nil && pendingKey != key { // the key changed again
		pending.Close()
		pending = nil
	}
	if pending == nil {
		if key == n.connKeyNow() {
			return
		}
		conn, k, err := n.connect()
		if err != nil {
			n.log.Error("NATS: cannot connect with the new NKey", "err", err)
			return
		}
		n.log.Info("NATS NKey seed changed: connecting with the new key", "nkey", k)
		pending, pendingKey = conn, k
		n.mu.Lock()
		n.pending, n.pendingKey = conn, k
		n.mu.Unlock()
	}
	if !pending.IsConnected() && current.IsConnected() {
		return // the old key still works: it is used until the new one does
	}
	pub, err := status.NewNATSPublisher(pending, n.provider)
	if err != nil {
		n.log.Error("NATS: cannot publish with the new NKey", "err", redact.Text(err.Error(), n.url))
		return
	}
	n.mu.Lock()
	n.conn, n.connKey = pending, pendingKey
	n.pending, n.pendingKey = nil, ""
	n.mu.Unlock()
	n.pub.Store(pub)
	current.Close()
	n.askRepublish()
	n.log.Info("NATS: the connection with the new NKey is in use", "nkey", pendingKey)
}

func (n *Link) connKeyNow() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.connKey
}

// Current is the connection in use.
func (n *Link) Current() *nats.Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conn
}

// ErrNotStarted: Publish before Start.
var ErrNotStarted = errors.New("the NATS connection is not started")

// Publish sends one status event (status.Publisher). The controller runs only after the
// connection is started.
func (n *Link) Publish(ctx context.Context, eventID, id string, rep status.Report) (bool, error) {
	pub := n.pub.Load()
	if pub == nil {
		return false, ErrNotStarted
	}
	return pub.Publish(ctx, eventID, id, rep)
}
