package httpapi

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// FuzzPageToken reads s both as a page token and as a container id. As a token:
// decoding never panics, only yields ids the API can hold, and a token that decodes is
// the one the server would issue for that id (byte for byte when s is in canonical
// base64url form; see canonicalToken). As an id: its token decodes back to it exactly
// when the id is one the API accepts. The seed corpus is testdata/fuzz/FuzzPageToken.
func FuzzPageToken(f *testing.F) {
	for _, s := range []string{
		"web-1", encodePageToken("web-1"), encodePageToken("123e4567-e89b-12d3-a456-426614174000"),
		"", "!!", "YWJj", encodePageToken("Bad_ID"), encodePageToken("health"), "djE6", "djE6d2ViLWFwcC0y\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if id, ok := decodePageToken(s); ok {
			if vs := container.ValidateID("id", id); len(vs) > 0 {
				t.Fatalf("token %q decodes to %q, an id the API refuses: %q", s, id, vs)
			}
			tok := encodePageToken(id)
			if again, ok := decodePageToken(tok); !ok || again != id {
				t.Fatalf("token %q -> %q -> %q -> %q, %v", s, id, tok, again, ok)
			}
			if canonicalToken(s) && tok != s {
				t.Fatalf("token %q decodes to %q, whose token is %q", s, id, tok)
			}
		} else if id != "" {
			t.Fatalf("refused token %q still yields id %q", s, id)
		}

		got, ok := decodePageToken(encodePageToken(s))
		if valid := len(container.ValidateID("id", s)) == 0; ok != valid || (ok && got != s) {
			t.Fatalf("id %q (valid: %v): its token decodes to %q, %v", s, valid, got, ok)
		}
	})
}

// canonicalToken reports whether s is strict, unpadded base64url: the decoder also
// accepts CR and LF anywhere and non-zero trailing bits, so several spellings of one
// token decode alike (harmless: they all continue after the same id).
func canonicalToken(s string) bool {
	_, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && !strings.ContainsAny(s, "\r\n")
}
