package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// With TLS, the self probe reaches our own listener although its certificate cannot be
// verified for the address probed (here: signed by an unknown CA, as httptest's is).
func TestSelfProbeOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	if err := selfProbe(srv.URL + "/health")(context.Background()); err != nil {
		t.Fatalf("self probe over TLS: %v", err)
	}
	srv.Close()
	if err := selfProbe(srv.URL + "/health")(context.Background()); err == nil {
		t.Error("the self probe succeeded with the server gone")
	}
}
