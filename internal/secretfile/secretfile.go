package secretfile

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Interval is how often the service looks at its secret files.
const Interval = 2 * time.Second

// Value is the last good result of parsing a set of files.
type Value[T any] struct {
	paths []string
	every time.Duration
	parse func(contents [][]byte) (T, error)
	what  string
	log   *slog.Logger

	cur  atomic.Pointer[checked[T]]
	mu   sync.Mutex    // one look at the files at a time
	seen []os.FileInfo // under mu: the files as last looked at (nil: could not stat)
}

type checked[T any] struct {
	v  T
	at time.Time
}

// Watch reads and parses paths now (an error is returned as is) and again, on Get, when
// they have changed; every is the least time between two looks at the files (0: every
// Get). what names the value in log lines.
func Watch[T any](what string, paths []string, every time.Duration, parse func(contents [][]byte) (T, error), log *slog.Logger) (*Value[T], error) {
	v := &Value[T]{paths: paths, every: every, parse: parse, what: what, log: log}
	v.seen = v.stat()
	val, err := v.load()
	if err != nil {
		return nil, err
	}
	v.cur.Store(&checked[T]{v: val, at: time.Now()})
	return v, nil
}

// Get returns the current value, looking at the files first when the last look is
// older than the interval. Safe for concurrent use.
func (v *Value[T]) Get() T {
	c := v.cur.Load()
	if time.Since(c.at) < v.every {
		return c.v
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c = v.cur.Load(); time.Since(c.at) < v.every {
		return c.v // another caller just looked
	}
	val := c.v
	if now := v.stat(); !sameFiles(now, v.seen) {
		v.seen = now
		if nv, err := v.load(); err != nil {
			v.log.Warn(v.what+" changed but cannot be used; keeping the previous one", "files", v.paths, "err", err)
		} else {
			val = nv
			v.log.Info(v.what+" reloaded", "files", v.paths)
		}
	}
	v.cur.Store(&checked[T]{v: val, at: time.Now()})
	return val
}

// stat follows symbolic links: a Kubernetes Secret volume swaps a link to a new
// directory, so the file behind the path is a new one.
func (v *Value[T]) stat() []os.FileInfo {
	out := make([]os.FileInfo, len(v.paths))
	for i, p := range v.paths {
		out[i], _ = os.Stat(p)
	}
	return out
}

func (v *Value[T]) load() (T, error) {
	contents := make([][]byte, len(v.paths))
	for i, p := range v.paths {
		b, err := readFile(p)
		if err != nil {
			var zero T
			return zero, err
		}
		contents[i] = b
	}
	return v.parse(contents)
}

func sameFiles(a, b []os.FileInfo) bool {
	for i := range a {
		switch {
		case a[i] == nil || b[i] == nil:
			if a[i] != b[i] {
				return false
			}
		case !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()):
			return false
		}
	}
	return true
}

// readFile reads a secret file; a permission problem names the uid, which is what the
// operator has to fix (the image runs as 65532).
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%w (this process runs as uid %d)", err, os.Getuid())
	}
	return b, err
}

// Token watches an API token file: its content without surrounding white space, never
// empty.
func Token(path string, every time.Duration, log *slog.Logger) (*Value[[]byte], error) {
	return Watch("API token", []string{path}, every, func(c [][]byte) ([]byte, error) { return parseToken(path, c[0]) }, log)
}

// LoadToken reads an API token file once (configuration check).
func LoadToken(path string) ([]byte, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parseToken(path, b)
}

func parseToken(path string, b []byte) ([]byte, error) {
	tok := bytes.TrimSpace(b)
	if len(tok) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}

// LoadKeyPair reads a PEM certificate (chain) and its private key once.
func LoadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := readFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile(keyFile)
	if err != nil {
		return nil, err
	}
	return parseKeyPair(certFile, keyFile, certPEM, keyPEM)
}

func parseKeyPair(certFile, keyFile string, certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s are not a certificate and its key: %w", certFile, keyFile, err)
	}
	return &c, nil
}

// ServerTLS is the server's TLS configuration: TLS 1.2 or later, with the certificate
// and key of certFile and keyFile, reloaded when they change (each handshake gets the
// last good pair).
func ServerTLS(certFile, keyFile string, every time.Duration, log *slog.Logger) (*tls.Config, error) {
	pair, err := WatchKeyPair("TLS certificate", certFile, keyFile, every, log)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return pair.Get(), nil
		},
	}, nil
}
