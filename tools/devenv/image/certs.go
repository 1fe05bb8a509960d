package image

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// caBundle is /etc/ssl/certs/ca-certificates.crt: the NSS trust store's roots as the Go
// module golang.org/x/crypto/x509roots/fallback carries them (pinned in go.mod, so the
// bundle changes only when go.mod does), PEM-encoded in the module's order.
//
// A root with a constraint (today one: a distrust-after date) is left out: a PEM file
// cannot say the constraint, and trusting the root without it would trust more than NSS
// does.
func caBundle() (pemBytes []byte, roots int) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		// pem.Encode to a bytes.Buffer cannot fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		roots++
	}
	return buf.Bytes(), roots
}
