package container

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// FuzzImagePolicy: whatever the reference, the image policy never panics, never lets
// an image come from an address-like, loopback, cluster-internal or single-label host
// (unless listed exactly), and with an allow-list lets only its hosts through.
func FuzzImagePolicy(f *testing.F) {
	for _, s := range []string{
		"nginx", "quay.io/app:v1", "127.0.0.1:22/x", "localhost:5000/x", "169.254.169.254/x", "[::1]:10250/x",
		"10.96.0.1/x", "kubernetes.default.svc:443/x", "nats.dcm.svc:4222/x", "2130706433/x", "0x7f.1/x",
		"a.example.com/x", "[fe80::1%25eth0]/x", "KUBERNETES.DEFAULT/x", "quay.io./x", "x.svc./x", "1.2.3.4.nip.io/x",
	} {
		f.Add(s)
	}
	listed := Policy{Registries: []string{"quay.io", "*.example.com"}}
	anyHost := Policy{Registries: []string{"*"}}
	f.Fuzz(func(t *testing.T, ref string) {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			_ = validateImage(ref, anyHost) // must not panic on anything
			return
		}
		domain := reference.Domain(named)
		host, _ := splitHostPort(domain)
		bare := strings.Trim(strings.TrimSuffix(host, "."), "[]")
		if i := strings.IndexByte(bare, '%'); i >= 0 {
			bare = bare[:i]
		}
		if anyHost.registryProblem(domain, reference.Path(named)) == "" {
			if _, err := netip.ParseAddr(bare); err == nil {
				t.Fatalf("%q: an IP-literal host %q was allowed", ref, host)
			}
			if !strings.Contains(bare, ".") || bare == "localhost" || strings.HasSuffix(bare, ".svc") ||
				strings.HasSuffix(bare, ".cluster.local") || bare == "kubernetes.default" || strings.HasPrefix(bare, "kubernetes.default.") {
				t.Fatalf("%q: host %q was allowed", ref, host)
			}
		}
		if listed.registryProblem(domain, reference.Path(named)) == "" && host != "quay.io" && !strings.HasSuffix(host, ".example.com") {
			t.Fatalf("%q: host %q is not on the list but was allowed", ref, domain)
		}
	})
}
