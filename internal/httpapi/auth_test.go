package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/secretfile"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

const apiToken = "s3cret-api-token"

// tokenFile writes content to a token file the way a Secret volume updates it (a new
// file renamed over the old one).
func tokenFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// authHandler is the whole stack with the token in a file (looked at on every request).
func authHandler(t *testing.T, path string, a *answer) http.Handler {
	t.Helper()
	tok, err := secretfile.Token(path, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(Options{
		Store:    fakeStore{t: t, a: a},
		Objects:  container.Options{Namespace: "dcm"},
		Health:   func(context.Context) error { return nil },
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		APIToken: tok.Get,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func send(h http.Handler, method, target, authorization, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// expectUnauthenticated checks a 401: the shared problem shape, a Bearer challenge,
// and no trace of the token.
func expectUnauthenticated(t *testing.T, rec *httptest.ResponseRecorder, target, detail string) {
	t.Helper()
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401: %s", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("WWW-Authenticate"); got != "Bearer" {
		t.Errorf("WWW-Authenticate %q, want Bearer", got)
	}
	if rec.Header().Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
	if strings.Contains(rec.Body.String(), apiToken) {
		t.Errorf("the answer carries the token: %s", rec.Body)
	}
	checkProblem(t, rec, contractRow{target: target, code: "unauthenticated", detail: detail})
}

func TestBearerToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	tokenFile(t, path, "  "+apiToken+"\n")
	const (
		containers = "/api/v1alpha1/containers"
		one        = "/api/v1alpha1/containers/web"
	)
	cases := []struct {
		name           string
		method, target string
		authorization  string
		body           string
		store          *answer // nil: must not reach the store
		status         int
		detail         string // of a 401; "": any
	}{
		{name: "create without a header", method: "POST", target: containers + "?id=web", body: validBody,
			status: 401, detail: "this API needs the header Authorization: Bearer with the API token"},
		{name: "get with another scheme", method: "GET", target: one, authorization: "Basic dXNlcjpzM2NyZXQ=",
			status: 401, detail: "the Authorization header must use the Bearer scheme"},
		{name: "list with a wrong token", method: "GET", target: containers, authorization: "Bearer nope", status: 401,
			detail: "the bearer token is not valid"},
		{name: "delete with the token plus more", method: "DELETE", target: one, authorization: "Bearer " + apiToken + "x", status: 401,
			detail: "the bearer token is not valid"},
		{name: "an empty token", method: "GET", target: one, authorization: "Bearer ", status: 401, detail: "the bearer token is not valid"},
		{name: "the token without a scheme", method: "GET", target: one, authorization: apiToken, status: 401,
			detail: "the Authorization header must use the Bearer scheme"},
		{name: "an unknown path", method: "GET", target: "/api/v1alpha1/other", status: 401},
		{name: "validation comes after authentication", method: "POST", target: containers + "?id=Bad_ID", body: "{}", status: 401},

		{name: "create with the token", method: "POST", target: containers + "?id=web", authorization: "Bearer " + apiToken,
			body: validBody, store: &answer{}, status: 201},
		{name: "get with the token, scheme in lower case", method: "GET", target: one, authorization: "bearer " + apiToken,
			store: fails(store.ErrNotFound), status: 404},
		{name: "list with the token", method: "GET", target: containers, authorization: "Bearer " + apiToken, store: &answer{}, status: 200},
		{name: "delete with the token", method: "DELETE", target: one, authorization: "Bearer " + apiToken, store: &answer{}, status: 204},

		{name: "health is open", method: "GET", target: "/health", status: 200},
		{name: "the registry's health path is open", method: "GET", target: containers + "/health", status: 200},
		{name: "health with a wrong token is still open", method: "GET", target: "/health", authorization: "Bearer nope", status: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := send(authHandler(t, path, tc.store), tc.method, tc.target, tc.authorization, tc.body)
			if tc.status == 401 {
				expectUnauthenticated(t, rec, tc.target, tc.detail)
				return
			}
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
		})
	}
}

// Readiness and liveness paths, wherever they are served, are never behind the token.
func TestOpenPathsNeedNoToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	tokenFile(t, path, apiToken)
	h := authHandler(t, path, nil)
	for _, p := range []string{"/health", "/api/v1alpha1/containers/health", "/readyz", "/livez", "/metrics"} {
		if rec := send(h, "GET", p, "", ""); rec.Code == http.StatusUnauthorized {
			t.Errorf("GET %s without a token: 401", p)
		}
	}
}

// A new token in the file is the token from the next request on; the old one is refused.
func TestRotatedTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	tokenFile(t, path, "first-token")
	h := authHandler(t, path, &answer{})
	list := "/api/v1alpha1/containers"
	if rec := send(h, "GET", list, "Bearer first-token", ""); rec.Code != 200 {
		t.Fatalf("first token: %d %s", rec.Code, rec.Body)
	}
	tokenFile(t, path, "second-token\n")
	expectUnauthenticated(t, send(h, "GET", list, "Bearer first-token", ""), list, "the bearer token is not valid")
	if rec := send(h, "GET", list, "Bearer second-token", ""); rec.Code != 200 {
		t.Fatalf("second token: %d %s", rec.Code, rec.Body)
	}
	// An emptied file does not open the API nor lock it: the last token stays.
	tokenFile(t, path, "")
	expectUnauthenticated(t, send(h, "GET", list, "Bearer ", ""), list, "the bearer token is not valid")
	if rec := send(h, "GET", list, "Bearer second-token", ""); rec.Code != 200 {
		t.Fatalf("after the file was emptied: %d %s", rec.Code, rec.Body)
	}
}

// Without a token configured (the default) nothing asks for one.
func TestNoTokenConfigured(t *testing.T) {
	h, err := NewHandler(Options{
		Store:  fakeStore{t: t, a: &answer{}},
		Health: func(context.Context) error { return nil },
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec := send(h, "GET", "/api/v1alpha1/containers", "", ""); rec.Code != 200 {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}
