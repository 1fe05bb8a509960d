package image

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// ca-certificates.crt is every unconstrained NSS root of the pinned module, as PEM that
// Go's x509 parses, the same bytes every time.
func TestCABundle(t *testing.T) {
	got, n := caBundle()
	unconstrained, constrained := 0, 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			constrained++
		} else {
			unconstrained++
		}
	}
	if n != unconstrained || n < 100 {
		t.Errorf("%d roots, want the %d unconstrained ones (%d constrained left out)", n, unconstrained, constrained)
	}
	parsed, rest := 0, got
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			t.Fatalf("block of type %q", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("root %d: %v", parsed, err)
		}
		if !c.IsCA {
			t.Errorf("root %d (%s) is not a CA", parsed, c.Subject)
		}
		parsed++
	}
	if len(rest) != 0 || parsed != n {
		t.Errorf("parsed %d of %d roots, %d bytes left over", parsed, n, len(rest))
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(got) {
		t.Error("a cert pool takes none of the bundle")
	}
	if again, _ := caBundle(); string(again) != string(got) {
		t.Error("two calls gave different bundles")
	}
}
