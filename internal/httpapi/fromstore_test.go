package httpapi

import (
	"errors"
	"net/http"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/store"
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
			&store.Error{Kind: store.KindUnavailable, Message: "the Kubernetes API is unavailable", Err: errors.New("dial tcp: refused")},
			"the Kubernetes API is unavailable; retry later", 5},
		{"our own limiter refused",
			&store.Error{Kind: store.KindUnavailable, Message: "this provider limits how fast it confirms unknown container ids; retry after 3 s", RetryAfter: 3},
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

// An admission policy's refusal is the client's to read (422, the policy's words), not
// a 503 to retry.
func TestFromStorePolicy(t *testing.T) {
	msg := `the cluster's admission policy refused it: admission webhook "policy.example.com" denied the request: label team is required`
	p := fromStore(&store.Error{Kind: store.KindPolicy, Message: msg}, "web")
	if p.Status != http.StatusUnprocessableEntity || p.Code != "rejected-by-cluster-policy" || p.Detail != msg || p.RetryAfter != 0 {
		t.Errorf("got %d %s %q retry after %d", p.Status, p.Code, p.Detail, p.RetryAfter)
	}
	if b := p.body("/x"); b.Type != ProblemTypeBase+"rejected-by-cluster-policy" || b.Title != "Rejected by cluster policy" {
		t.Errorf("body %+v", b)
	}
}
