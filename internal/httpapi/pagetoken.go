package httpapi

import (
	"encoding/base64"
	"strings"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Page tokens are opaque to clients: "v1:" and the last id of the previous page,
// base64url-encoded. Paging by id is what keeps a walk stable under churn.
const tokenPrefix = "v1:"

func encodePageToken(lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + lastID))
}

// decodePageToken returns the id to continue after, or false for a token this server
// never issued.
func decodePageToken(tok string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), tokenPrefix) {
		return "", false
	}
	id := strings.TrimPrefix(string(b), tokenPrefix)
	if len(container.ValidateID("page_token", id)) > 0 {
		return "", false
	}
	return id, true
}
