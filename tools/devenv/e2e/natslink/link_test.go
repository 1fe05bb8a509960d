package natslink_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/logtest"
	"github.com/dcm-project/k8s-container-sp/internal/natslink"
	"github.com/dcm-project/k8s-container-sp/internal/secretfile"
	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testpki"
)

// Dialling NATS is the component's start: a server that does not answer is no error
// (the client keeps trying, events wait), a URL the client refuses is one, naming it
// without its credentials.
func TestNATSLinkStart(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, url, err string
	}{
		{"nothing listens: connects later", "nats://127.0.0.1:1", ""},
		{"not a NATS URL", "nats://[bad", "connecting to nats://[bad: "},
		{"not a NATS URL, with a password", "nats://sp:s3cret-pw@[bad", "connecting to nats://xxxxx@[bad: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := natslink.New(tc.url, "test", "k8s-container-sp", config.NATS{}, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := n.Publish(context.Background(), "e1", "a", status.Report{Status: container.Status{Status: v1alpha1.RUNNING}}); !errors.Is(err, natslink.ErrNotStarted) {
				t.Errorf("publish before start: %v", err)
			}
			err = n.Start(context.Background())
			if (err == nil) != (tc.err == "") || err != nil && !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("start: %v, want %q", err, tc.err)
			}
			if err != nil {
				if strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(err.Error(), "sp:") {
					t.Errorf("the error shows the credentials: %v", err)
				}
				return
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := n.Run(ctx); err != nil || !n.Current().IsClosed() {
				t.Errorf("run: %v, closed %v", err, n.Current().IsClosed())
			}
		})
	}
}

// runLink starts a link named sp-test to url, authenticating with files (looked at
// every every) and logging as JSON to logs; stop ends its run.
func runLink(t *testing.T, url string, files config.NATS, every time.Duration, logs io.Writer) (n *natslink.Link, stop func()) {
	t.Helper()
	n, err := natslink.NewEvery(url, "sp-test", "sp", files, every, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	return n, func() { cancel(); <-done }
}

// startNATS runs a nats-server in this process on a loopback port; opts are completed
// with the port, no logging and no signals.
func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

func natsPort(srv *server.Server) int { return srv.Addr().(*net.TCPAddr).Port }

// clientOf is what the server knows of the connection named name: its NKey (or the
// user's public key for a JWT) and its certificate's subject.
func clientOf(t *testing.T, srv *server.Server, name string) (user, subject string, cid uint64, ok bool) {
	t.Helper()
	cz, err := srv.Connz(&server.ConnzOptions{Username: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cz.Conns {
		if c.Name != name {
			continue
		}
		if len(c.TLSPeerCerts) > 0 {
			subject = c.TLSPeerCerts[0].Subject
		}
		return c.AuthorizedUser, subject, c.Cid, true
	}
	return "", "", 0, false
}

// eventually polls f until it holds, failing after 15 s with what it last said.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Credentials in SP_NATS_URL (user and password, or a token as user) are never in a log
// line of the link: connected, disconnected, reconnected, refused.
func TestNATSLinkLogsNoURLCredentials(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   server.Options
		user   string // the URL's user information
		secret []string
	}{
		{"user and password", server.Options{Username: "sp-us3r", Password: "pa55w0rd-x"}, "sp-us3r:pa55w0rd-x", []string{"sp-us3r", "pa55w0rd-x"}},
		{"token", server.Options{Authorization: "t0ken-abcdef"}, "t0ken-abcdef", []string{"t0ken-abcdef"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startNATS(t, &tc.opts)
			logs := &logtest.Buffer{}
			run := func(user string) func() {
				_, stop := runLink(t, fmt.Sprintf("nats://%s@127.0.0.1:%d", user, natsPort(srv)), config.NATS{}, secretfile.Interval, logs)
				return stop
			}
			stop := run(tc.user)
			eventually(t, "connected", func() error {
				if _, _, _, ok := clientOf(t, srv, "sp-test"); !ok {
					return errors.New("no connection")
				}
				return nil
			})
			_, _, cid, _ := clientOf(t, srv, "sp-test")
			_ = srv.DisconnectClientByID(cid)
			eventually(t, "reconnected", func() error {
				if !strings.Contains(logs.String(), "NATS reconnected") {
					return errors.New(logs.String())
				}
				return nil
			})
			stop()
			// Refused: wrong credentials of the same shape.
			wrong := strings.ReplaceAll(tc.user, "x", "y") + "-wrong"
			stop = run(wrong)
			eventually(t, "refused", func() error {
				if !strings.Contains(strings.ToLower(logs.String()), "authorization violation") {
					return errors.New(logs.String())
				}
				return nil
			})
			stop()
			for _, s := range append(tc.secret, wrong) {
				if strings.Contains(logs.String(), s) {
					t.Errorf("the log shows %q:\n%s", s, logs)
				}
			}
		})
	}
}

func seedOf(t *testing.T, kp nkeys.KeyPair) []byte {
	t.Helper()
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return append(seed, '\n')
}

func publicOf(t *testing.T, kp nkeys.KeyPair) string {
	t.Helper()
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// tlsServer is a server TLS configuration that requires a client certificate of
// clients and serves *cert (swappable: a server certificate from another CA).
func tlsServer(cert *atomic.Pointer[tls.Certificate], clients *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil },
	}
}

// The server takes no user or password: only an NKey, over TLS with a client
// certificate. The link authenticates from the files and follows them: a rotated
// client certificate and CA are used by the next reconnection, a new NKey seed by a new
// connection, and status events keep flowing.
func TestNATSNKeyAndTLSFromFilesFollowRotation(t *testing.T) {
	dir := t.TempDir()
	serverCA, serverCA2, clientCA := testpki.NewCA(t, "server CA 1"), testpki.NewCA(t, "server CA 2"), testpki.NewCA(t, "client CA")
	keyA, _ := nkeys.CreateUser()
	keyB, _ := nkeys.CreateUser()
	keySub, _ := nkeys.CreateUser()
	var srvCert atomic.Pointer[tls.Certificate]
	srvCert.Store(serverCA.ServerCert(t, "nats 1"))
	opts := &server.Options{
		TLS: true, TLSVerify: true, TLSTimeout: 5, TLSConfig: tlsServer(&srvCert, clientCA.Pool),
		Nkeys: []*server.NkeyUser{{Nkey: publicOf(t, keyA)}, {Nkey: publicOf(t, keyB)}, {Nkey: publicOf(t, keySub)}},
	}
	srv := startNATS(t, opts)
	url := fmt.Sprintf("tls://127.0.0.1:%d", natsPort(srv))

	// Files as Secrets mount them.
	files := config.NATS{
		NKeySeedFile: filepath.Join(dir, "seed"), TLSCAFile: filepath.Join(dir, "ca.crt"),
		TLSCertFile: filepath.Join(dir, "tls.crt"), TLSKeyFile: filepath.Join(dir, "tls.key"),
	}
	testpki.WriteAtomically(t, files.NKeySeedFile, seedOf(t, keyA))
	testpki.WriteAtomically(t, files.TLSCAFile, serverCA.PEM)
	c1, k1 := clientCA.Issue(t, "provider 1", x509.ExtKeyUsageClientAuth)
	testpki.WriteAtomically(t, files.TLSCertFile, c1)
	testpki.WriteAtomically(t, files.TLSKeyFile, k1)
	// The settings check accepts them (and would refuse a broken one, naming it).
	if _, err := config.Load([]string{"SP_NAME=sp", "SP_ENDPOINT=http://sp:8080", "DCM_REGISTRATION_URL=http://r:8080/api/v1alpha1",
		"SP_NATS_URL=" + url, "SP_NATS_NKEY_SEED_FILE=" + files.NKeySeedFile, "SP_NATS_TLS_CA_FILE=" + files.TLSCAFile,
		"SP_NATS_TLS_CERT_FILE=" + files.TLSCertFile, "SP_NATS_TLS_KEY_FILE=" + files.TLSKeyFile}); err != nil {
		t.Fatal(err)
	}

	// A subscriber, as DCM's registry would be.
	subSeed := seedOf(t, keySub)
	subKey, _ := nkeys.FromSeed(subSeed[:len(subSeed)-1])
	subCert, subKeyPEM := clientCA.Issue(t, "registry", x509.ExtKeyUsageClientAuth)
	subPair, _ := tls.X509KeyPair(subCert, subKeyPEM)
	sub, err := nats.Connect(url, nats.Nkey(publicOf(t, keySub), subKey.Sign),
		nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: serverCA.Pool, Certificates: []tls.Certificate{subPair}}))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	events, err := sub.SubscribeSync(status.Subject)
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.Flush()

	logs := &logtest.Buffer{}
	n, stop := runLink(t, url, files, 10*time.Millisecond, logs)
	defer stop()

	// expect waits until the server sees the link with user and subject, then sends an
	// event the subscriber receives.
	expect := func(step, user, subject string) uint64 {
		t.Helper()
		var cid uint64
		eventually(t, step, func() error {
			u, s, id, ok := clientOf(t, srv, "sp-test")
			cz, _ := srv.Connz(&server.ConnzOptions{Username: true})
			var ours int
			for _, c := range cz.Conns {
				if c.Name == "sp-test" {
					ours++
				}
			}
			if !ok || u != user || !strings.Contains(s, subject) || ours != 1 || !n.Current().IsConnected() {
				return fmt.Errorf("server sees user %q subject %q (%d connections), want %q %q; log %s", u, s, ours, user, subject, logs)
			}
			cid = id
			return nil
		})
		eventually(t, step+": an event arrives", func() error {
			pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer pcancel()
			if _, err := n.Publish(pctx, status.NewEventID(), step, status.Report{Status: container.Status{Status: v1alpha1.RUNNING}}); err != nil {
				return err
			}
			m, err := events.NextMsg(time.Second)
			if err != nil {
				return err
			}
			if !strings.Contains(string(m.Data), `"`+step+`"`) {
				return fmt.Errorf("event %s", m.Data)
			}
			return nil
		})
		return cid
	}
	cid := expect("first", publicOf(t, keyA), "CN=provider 1")

	// 1. A new client certificate, and the server moves to a certificate of another CA
	// (the CA file is rotated to it): the next reconnection uses both new files.
	c2, k2 := clientCA.Issue(t, "provider 2", x509.ExtKeyUsageClientAuth)
	testpki.WriteAtomically(t, files.TLSCertFile, c2)
	testpki.WriteAtomically(t, files.TLSKeyFile, k2)
	testpki.WriteAtomically(t, files.TLSCAFile, serverCA2.PEM)
	srvCert.Store(serverCA2.ServerCert(t, "nats 2"))
	time.Sleep(50 * time.Millisecond) // past the files' look interval
	if err := srv.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	cid = expect("rotated TLS files", publicOf(t, keyA), "CN=provider 2")

	// A file that breaks is logged and the last good one kept: the next reconnection
	// still works.
	testpki.WriteAtomically(t, files.TLSCertFile, []byte("not a certificate\n"))
	time.Sleep(50 * time.Millisecond)
	if err := srv.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	_ = expect("broken certificate file", publicOf(t, keyA), "CN=provider 2")
	if !strings.Contains(logs.String(), "NATS client certificate changed but cannot be used; keeping the previous one") {
		t.Errorf("the broken file is not logged: %s", logs)
	}
	testpki.WriteAtomically(t, files.TLSCertFile, c2)

	// 2. A new NKey: the server is told to take it only (as an operator rotating it
	// does), and the link connects with it; the old connection goes.
	testpki.WriteAtomically(t, files.NKeySeedFile, seedOf(t, keyB))
	reload := *opts
	reload.Nkeys = []*server.NkeyUser{{Nkey: publicOf(t, keyB)}, {Nkey: publicOf(t, keySub)}}
	if err := srv.ReloadOptions(&reload); err != nil {
		t.Fatal(err)
	}
	expect("rotated NKey", publicOf(t, keyB), "CN=provider 2")
	if !strings.Contains(logs.String(), publicOf(t, keyB)) {
		t.Errorf("the new key is not logged: %s", logs)
	}
	for _, secret := range [][]byte{seedOf(t, keyA), seedOf(t, keyB)} {
		if strings.Contains(logs.String(), strings.TrimSpace(string(secret))) {
			t.Errorf("the log shows a seed: %s", logs)
		}
	}
}

// A credentials file (a user JWT and its seed, from nsc) against a server in operator
// mode: the link authenticates with it, and a rotated file (another user of the
// account) is used by the next reconnection.
func TestNATSCredsFileFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	operator, _ := nkeys.CreateOperator()
	account, _ := nkeys.CreateAccount()
	oc := jwt.NewOperatorClaims(publicOf(t, operator))
	opJWT, err := oc.Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	ac := jwt.NewAccountClaims(publicOf(t, account))
	accJWT, err := ac.Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	opClaims, err := jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(publicOf(t, account), accJWT); err != nil {
		t.Fatal(err)
	}
	srv := startNATS(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{opClaims}, AccountResolver: resolver})
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort(srv))

	creds := func(name string) (nkeys.KeyPair, []byte) {
		user, _ := nkeys.CreateUser()
		uc := jwt.NewUserClaims(publicOf(t, user))
		uc.Name = name
		userJWT, err := uc.Encode(account)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := user.Seed()
		b, err := jwt.FormatUserConfig(userJWT, seed)
		if err != nil {
			t.Fatal(err)
		}
		return user, b
	}
	file := filepath.Join(dir, "user.creds")
	user1, b1 := creds("one")
	testpki.WriteAtomically(t, file, b1)
	if _, err := config.Load([]string{"SP_NAME=sp", "SP_ENDPOINT=http://sp:8080", "DCM_REGISTRATION_URL=http://r:8080/api/v1alpha1",
		"SP_NATS_URL=" + url, "SP_NATS_CREDS_FILE=" + file}); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	n, stop := runLink(t, url, config.NATS{CredsFile: file}, 10*time.Millisecond, logs)
	defer stop()
	expect := func(user nkeys.KeyPair) uint64 {
		var cid uint64
		eventually(t, "connected as "+publicOf(t, user), func() error {
			u, _, id, ok := clientOf(t, srv, "sp-test")
			if !ok || u != publicOf(t, user) || !n.Current().IsConnected() {
				return fmt.Errorf("server sees %q; log %s", u, logs)
			}
			cid = id
			return nil
		})
		return cid
	}
	cid := expect(user1)
	user2, b2 := creds("two")
	testpki.WriteAtomically(t, file, b2)
	time.Sleep(50 * time.Millisecond)
	if err := srv.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	expect(user2)
	pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer pcancel()
	if _, err := n.Publish(pctx, status.NewEventID(), "a", status.Report{Status: container.Status{Status: v1alpha1.RUNNING}}); err != nil {
		t.Errorf("publish: %v", err)
	}
}
