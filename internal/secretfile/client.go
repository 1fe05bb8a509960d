package secretfile

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
)

// The files a client of NATS authenticates with: a credentials file (a user JWT and its
// NKey seed, as nsc writes it), an NKey seed file, a CA bundle to verify the server by,
// and a client certificate and key. Each is read at start and, like the API token,
// again when it changes; the NATS link asks for the current value at every
// (re)connection.

// Creds is a user's JWT and the key pair that signs the server's nonce with it.
type Creds struct {
	JWT string
	Key nkeys.KeyPair
}

// NKey is a user's NKey: its public key (sent in CONNECT) and its key pair.
type NKey struct {
	Public string
	Key    nkeys.KeyPair
}

// Sign signs a server nonce.
func (c Creds) Sign(nonce []byte) ([]byte, error) { return c.Key.Sign(nonce) }

// Sign signs a server nonce.
func (n NKey) Sign(nonce []byte) ([]byte, error) { return n.Key.Sign(nonce) }

// LoadCreds reads a NATS credentials file once (configuration check).
func LoadCreds(path string) (Creds, error) { return load(path, parseCreds) }

// WatchCreds watches a NATS credentials file.
func WatchCreds(path string, every time.Duration, log *slog.Logger) (*Value[Creds], error) {
	return Watch("NATS credentials", []string{path}, every, func(c [][]byte) (Creds, error) { return parseCreds(path, c[0]) }, log)
}

// LoadNKey reads an NKey seed file once (configuration check).
func LoadNKey(path string) (NKey, error) { return load(path, parseNKey) }

// WatchNKey watches an NKey seed file.
func WatchNKey(path string, every time.Duration, log *slog.Logger) (*Value[NKey], error) {
	return Watch("NATS NKey seed", []string{path}, every, func(c [][]byte) (NKey, error) { return parseNKey(path, c[0]) }, log)
}

// LoadCertPool reads a PEM CA bundle once (configuration check).
func LoadCertPool(path string) (*x509.CertPool, error) { return load(path, parseCertPool) }

// WatchCertPool watches a PEM CA bundle.
func WatchCertPool(what, path string, every time.Duration, log *slog.Logger) (*Value[*x509.CertPool], error) {
	return Watch(what, []string{path}, every, func(c [][]byte) (*x509.CertPool, error) { return parseCertPool(path, c[0]) }, log)
}

// WatchKeyPair watches a PEM certificate (chain) and its key.
func WatchKeyPair(what, certFile, keyFile string, every time.Duration, log *slog.Logger) (*Value[*tls.Certificate], error) {
	return Watch(what, []string{certFile, keyFile}, every, func(c [][]byte) (*tls.Certificate, error) {
		return parseKeyPair(certFile, keyFile, c[0], c[1])
	}, log)
}

func load[T any](path string, parse func(string, []byte) (T, error)) (T, error) {
	b, err := readFile(path)
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(path, b)
}

// parseCreds: a user JWT and a user seed, in nsc's decorated form (or the JWT alone
// followed by the seed's line). Neither the JWT nor the seed is ever in a message.
func parseCreds(path string, b []byte) (Creds, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Creds{}, fmt.Errorf("%s is empty", path)
	}
	jwt, err := nkeys.ParseDecoratedJWT(b)
	if err != nil || !looksLikeJWT(jwt) {
		return Creds{}, fmt.Errorf("%s is not a NATS credentials file: no user JWT (-----BEGIN NATS USER JWT----- block)", path)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return Creds{}, fmt.Errorf("%s is not a NATS credentials file: no user NKey seed (-----BEGIN USER NKEY SEED----- block): %s", path, nkeyProblem(err))
	}
	return Creds{JWT: jwt, Key: kp}, nil
}

// looksLikeJWT: three base64url parts (ParseDecoratedJWT answers any text it does not
// recognise as the JWT itself).
func looksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) >= 0 {
			return false
		}
	}
	return true
}

// parseNKey: a user seed (SU...), alone or decorated.
func parseNKey(path string, b []byte) (NKey, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return NKey{}, fmt.Errorf("%s is empty", path)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return NKey{}, fmt.Errorf("%s is not a NATS user NKey seed (a line starting SU): %s", path, nkeyProblem(err))
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return NKey{}, fmt.Errorf("%s is not a NATS user NKey seed (a line starting SU)", path)
	}
	return NKey{Public: pub, Key: kp}, nil
}

// nkeyProblem says what nkeys found wrong, in its own fixed words (never the seed).
func nkeyProblem(err error) string {
	for _, known := range []error{nkeys.ErrNoSeedFound, nkeys.ErrInvalidNkeySeed, nkeys.ErrInvalidUserSeed, nkeys.ErrInvalidSeed,
		nkeys.ErrInvalidSeedLen, nkeys.ErrInvalidChecksum, nkeys.ErrInvalidEncoding, nkeys.ErrInvalidPrefixByte} {
		if errors.Is(err, known) {
			return known.Error()
		}
	}
	return "the seed does not decode"
}

func parseCertPool(path string, b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
