package secretfile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	stdlog "log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/logtest"
)

func newLog() (*slog.Logger, *logtest.Buffer) {
	l := &logtest.Buffer{}
	return slog.New(slog.NewTextHandler(l, nil)), l
}

// replace writes a file the way a Kubernetes Secret volume (and cert-manager through
// it) does: a new file renamed over the old one.
func replace(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ca signs leaf certificates for 127.0.0.1.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pool: pool}
}

// leaf returns PEM certificate and key for 127.0.0.1 named cn.
func (c *ca) leaf(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// serveTLS serves HTTPS with cfg on a loopback port and returns its URL.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ErrorLog: stdlog.New(io.Discard, "", 0), // refused handshakes are expected
	}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String()
}

// servedName makes a new, verified TLS connection and returns the server certificate's
// common name.
func servedName(t *testing.T, url string, roots *x509.CertPool) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true, // every request is a new handshake
	}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		t.Fatal("no TLS")
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName
}

// The served certificate follows the files: a rotated pair is served on the next
// handshake, a broken one is logged once and the last good pair kept, a repaired one
// served again.
func TestServerTLSReloadsThePair(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	authority := newCA(t)
	cert1, key1 := authority.leaf(t, "one")
	replace(t, certFile, cert1)
	replace(t, keyFile, key1)
	log, logs := newLog()
	cfg, err := ServerTLS(certFile, keyFile, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	url := serveTLS(t, cfg)
	if got := servedName(t, url, authority.pool); got != "one" {
		t.Fatalf("served %q, want one", got)
	}

	cert2, key2 := authority.leaf(t, "two")
	replace(t, certFile, cert2)
	replace(t, keyFile, key2)
	if got := servedName(t, url, authority.pool); got != "two" {
		t.Fatalf("after rotation served %q, want two", got)
	}
	if strings.Count(logs.String(), "TLS certificate reloaded") != 1 {
		t.Errorf("reload not logged once:\n%s", logs.String())
	}

	// Half a rotation: the new certificate, the old key.
	cert3, key3 := authority.leaf(t, "three")
	replace(t, certFile, cert3)
	for range 3 {
		if got := servedName(t, url, authority.pool); got != "two" {
			t.Fatalf("with a broken pair served %q, want the last good one (two)", got)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"TLS certificate changed but cannot be used"); n != 1 {
		t.Errorf("broken pair warned %d times, want once:\n%s", n, logs.String())
	}

	replace(t, keyFile, key3)
	if got := servedName(t, url, authority.pool); got != "three" {
		t.Fatalf("after the key arrived served %q, want three", got)
	}
}

func TestServerTLSRefusesOldVersions(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	authority := newCA(t)
	c, k := authority.leaf(t, "one")
	replace(t, certFile, c)
	replace(t, keyFile, k)
	log, _ := newLog()
	cfg, err := ServerTLS(certFile, keyFile, Interval, log)
	if err != nil {
		t.Fatal(err)
	}
	url := serveTLS(t, cfg)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{
		RootCAs: authority.pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11,
	})
	if err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

func TestServerTLSNeedsAGoodPairAtStart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	authority := newCA(t)
	c, _ := authority.leaf(t, "one")
	_, k := authority.leaf(t, "other")
	replace(t, certFile, c)
	log, _ := newLog()
	if _, err := ServerTLS(certFile, keyFile, 0, log); err == nil || !strings.Contains(err.Error(), keyFile) {
		t.Errorf("missing key: %v", err)
	}
	replace(t, keyFile, k)
	if _, err := ServerTLS(certFile, keyFile, 0, log); err == nil || !strings.Contains(err.Error(), "not a certificate and its key") {
		t.Errorf("mismatched key: %v", err)
	}
	if _, err := LoadKeyPair(certFile, keyFile); err == nil {
		t.Error("LoadKeyPair accepted a mismatched key")
	}
}

func TestToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	replace(t, path, []byte("  first-token\n"))
	log, logs := newLog()
	tok, err := Token(path, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(tok.Get()); got != "first-token" {
		t.Fatalf("token %q, want surrounding white space trimmed", got)
	}
	replace(t, path, []byte("second-token"))
	if got := string(tok.Get()); got != "second-token" {
		t.Fatalf("after rotation %q", got)
	}
	// Written in place (not renamed): seen through size and modification time.
	if err := os.WriteFile(path, []byte("third"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := string(tok.Get()); got != "third" {
		t.Fatalf("after an in-place write %q", got)
	}
	replace(t, path, []byte(" \n"))
	for range 3 {
		if got := string(tok.Get()); got != "third" {
			t.Fatalf("an emptied file replaced the token with %q", got)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := string(tok.Get()); got != "third" {
		t.Fatalf("a removed file replaced the token with %q", got)
	}
	if n := strings.Count(logs.String(), "API token changed but cannot be used"); n != 2 {
		t.Errorf("%d warnings, want one for the empty file and one for the removed one:\n%s", n, logs.String())
	}
	replace(t, path, []byte("fourth"))
	if got := string(tok.Get()); got != "fourth" {
		t.Fatalf("after the file came back %q", got)
	}
}

func TestTokenIsLookedAtAtMostOncePerInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	replace(t, path, []byte("first"))
	log, _ := newLog()
	tok, err := Token(path, time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, path, []byte("second"))
	if got := string(tok.Get()); got != "first" {
		t.Errorf("looked at the file within the interval: %q", got)
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	replace(t, empty, []byte("\n\t \n"))
	if _, err := LoadToken(empty); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := LoadToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
	if _, err := Token(empty, 0, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("Token accepted an empty file at start")
	}
}

// Many readers while the file rotates (run with -race).
func TestConcurrentGet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	replace(t, path, []byte("v0"))
	tok, err := Token(path, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if got := string(tok.Get()); !strings.HasPrefix(got, "v") {
					t.Errorf("token %q", got)
					return
				}
			}
		})
	}
	for i := range 20 {
		replace(t, path, []byte("v"+strings.Repeat("x", i)))
	}
	close(stop)
	wg.Wait()
}
