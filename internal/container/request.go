package container

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// A create may carry an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header):
// DCM's environment agent sends its request's event id there, the same on every retry.
// The key and a digest of the spec are kept on the container's record (Request), so a
// retry with the same key and the same spec gets that container back, on any replica,
// for as long as the container lives, and the same key with another spec is refused.

// Request is what a create's record keeps of the request that made it.
type Request struct {
	Key    string // the Idempotency-Key, "" when none was sent
	Digest string // RequestDigest of its spec
}

// The record's annotations that hold a Request.
const (
	AnnotationIdempotencyKey = "dcm.project/idempotency-key"
	AnnotationRequestDigest  = "dcm.project/request-digest"
)

// MaxIdempotencyKey bounds a key (bytes): it is kept on the record for the container's
// life.
const MaxIdempotencyKey = 255

// IdempotencyKey reads the header's value: a Structured Field string ("…", as the draft
// writes it) or the bare token DCM's agent sends. Violations name the header.
func IdempotencyKey(header string) (string, []Violation) {
	key := header
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		if k, err := strconv.Unquote(key); err == nil {
			key = k
		}
	}
	bad := func(why string) (string, []Violation) {
		return "", []Violation{{Param: "Idempotency-Key", Detail: "Idempotency-Key: " + why}}
	}
	switch {
	case key == "":
		return bad("must not be empty")
	case len(key) > MaxIdempotencyKey:
		return bad(fmt.Sprintf("must be at most %d characters, is %d", MaxIdempotencyKey, len(key)))
	case strings.IndexFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0:
		return bad("must be printable ASCII")
	}
	return key, nil
}

// idNamespace names the ids made from keys (a UUID of its own, so they are
// no other name-based UUIDs).
var idNamespace = uuid.MustParse("6f1c8a52-8f3e-4a8e-9d0b-5c1f0e2a7b41")

// IDForKey is the id of a create that sent a key and no id: a name-based UUID of the
// key (RFC 9562 version 5), so every retry of it names the same id, whichever replica
// it reaches, and finds the record the first one made.
func IDForKey(key string) string { return uuid.NewSHA1(idNamespace, []byte(key)).String() }

// RequestDigest identifies a spec: the SHA-256 of its JSON as this service encodes it
// (struct order, map keys sorted), so the same spec sent with or without the {"spec":
// …} wrapper, in any member order, has one digest.
func RequestDigest(spec *v1alpha1.ContainerSpec) string {
	b, err := json.Marshal(spec)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
