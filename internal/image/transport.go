package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// maxResponseBytes bounds one registry answer: the distribution spec lets a registry
// refuse manifests above 4 MiB, and tokens are far smaller.
const maxResponseBytes = 4 << 20

// newTransport sends each registry request to the host's mirror, if it has one, and
// dials a host the operator did not name only at a public address, so a reference
// (or a registry's token realm) cannot make the provider reach its own network.
func newTransport(o Options) http.RoundTripper {
	trusted := slices.Clone(o.Trusted)
	for _, m := range o.Mirrors {
		if u, err := url.Parse(m); err == nil {
			trusted = append(trusted, strings.ToLower(u.Hostname()))
		}
	}
	plain := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	guarded := &net.Dialer{Timeout: plain.Timeout, KeepAlive: plain.KeepAlive, Control: publicOnly}
	base := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			if slices.Contains(trusted, strings.ToLower(host)) {
				return plain.DialContext(ctx, network, addr)
			}
			return guarded.DialContext(ctx, network, addr)
		},
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
	}
	return &mirrored{mirrors: o.Mirrors, next: base}
}

// publicOnly refuses a connection to an address that is not a public unicast one.
func publicOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	if a := ap.Addr().Unmap(); !Public(a) {
		return fmt.Errorf("%s is not a public address", a)
	}
	return nil
}

var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// Public tells a public unicast address from a loopback, private, link-local or
// carrier-grade NAT one.
func Public(a netip.Addr) bool {
	return a.IsGlobalUnicast() && !a.IsPrivate() && !sharedAddressSpace.Contains(a)
}

// mirrored rewrites a request for a mirrored registry to its mirror, naming the
// registry in ns= as containerd does, so one mirror can serve many registries.
type mirrored struct {
	mirrors map[string]string
	next    http.RoundTripper
}

func (m *mirrored) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		host = "docker.io"
	}
	base, ok := m.mirrors[host]
	if !ok {
		base, ok = m.mirrors["*"]
	}
	if ok {
		u, err := url.Parse(base)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host, req.Host = u.Scheme, u.Host, u.Host
		q := req.URL.Query()
		q.Set("ns", host)
		req.URL.RawQuery = q.Encode()
	}
	resp, err := m.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &capped{r: resp.Body, left: maxResponseBytes}
	return resp, nil
}

var errTooLarge = errors.New("registry answer above 4 MiB")

// capped fails a read past its bound instead of truncating silently.
type capped struct {
	r    io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *capped) Close() error { return c.r.Close() }
