package httpapi

import (
	"errors"
	"net/http"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// A 503 says what happened when the store knows (its Message with a RetryAfter), else
// that the Kubernetes API is unavailable.
func TestFromStoreUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		detail     string
		retryAfter int
	}{
		{"the Kubernetes API failed",
			&kubeerr.Error{Kind: kubeerr.KindUnavailable, Message: "the Kubernetes API is unavailable", Err: errors.New("dial tcp: refused")},
			"the Kubernetes API is unavailable; retry later", 5},
		{"our own limiter refused",
			&kubeerr.Error{Kind: kubeerr.KindUnavailable, Message: "this provider limits how fast it confirms unknown container ids; retry after 3 s", RetryAfter: 3},
			"this provider limits how fast it confirms unknown container ids; retry after 3 s", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fromStore(tc.err, "web")
			if p.Status != http.StatusServiceUnavailable || p.Detail != tc.detail || p.RetryAfter != tc.retryAfter {
				t.Errorf("got %d %q retry after %d, want 503 %q retry after %d", p.Status, p.Detail, p.RetryAfter, tc.detail, tc.retryAfter)
			}
		})
	}
}
