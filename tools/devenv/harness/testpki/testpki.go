// Package testpki is a throwaway certificate authority for tests, with certificate and
// key files replaced the way a Kubernetes Secret volume replaces them.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// CA signs certificates for 127.0.0.1. Everything it makes is valid from an hour ago to
// an hour ahead: good at once, whatever the clocks, and for longer than any test runs.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, as a CA file holds it.
	PEM []byte
	// Pool holds the CA certificate, for a TLS configuration that trusts it.
	Pool *x509.CertPool
}

// NewCA makes a CA named cn with a new P-256 key.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
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
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Pool: pool}
}

// Issue makes a certificate named cn for 127.0.0.1, for server or client authentication
// as usage says, and returns it and its key as PEM.
func (c *CA) Issue(t testing.TB, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// A random serial: each certificate of one CA needs its own, and a rotation issues
	// another for the same name.
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// ServerCert is a server certificate named cn, for a TLS server in the test's process.
func (c *CA) ServerCert(t testing.TB, cn string) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM := c.Issue(t, cn, x509.ExtKeyUsageServerAuth)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// WritePair writes a server certificate named cn and its key to certFile and keyFile,
// each replaced with WriteAtomically.
func (c *CA) WritePair(t testing.TB, cn, certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := c.Issue(t, cn, x509.ExtKeyUsageServerAuth)
	WriteAtomically(t, certFile, certPEM)
	WriteAtomically(t, keyFile, keyPEM)
}

// WriteAtomically writes b to path+".new" and renames it over path, as a Secret volume
// replaces a file: a reader sees the old content or the new, never half of it.
func WriteAtomically(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}
