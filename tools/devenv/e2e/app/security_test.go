package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testpki"
)

// fakeRegistry accepts every registration and keeps the last one.
type fakeRegistry struct {
	*httptest.Server
	mu   sync.Mutex
	last map[string]any
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	r := &fakeRegistry{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(req.Body).Decode(&body)
		r.mu.Lock()
		r.last = body
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"provider-1"}`)
	}))
	t.Cleanup(r.Close)
	return r
}

// call sends a request with an optional bearer token through client.
func call(t *testing.T, client *http.Client, method, url, token string, body any) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if len(b) > 0 && bytes.Contains([]byte(resp.Header.Get("Content-Type")), []byte("json")) {
		if err := json.Unmarshal(b, &out.JSON); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, url, err, b)
		}
	}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		out.Header.Set("X-Test-Served-Certificate", resp.TLS.PeerCertificates[0].Subject.CommonName)
	}
	return out
}

// The service closed (SP_API_TOKEN_FILE and TLS): the API answers over HTTPS only, a
// request without the right token is a 401 that changes nothing, health and metrics
// stay open, the self probe works over TLS (so it registers), and a rotated token and
// certificate are used without a restart.
func TestAPITokenAndTLS(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	testpki.WriteAtomically(t, tokenFile, []byte("first-token\n"))
	authority := testpki.NewCA(t, "test CA")
	authority.WritePair(t, "one", certFile, keyFile)
	reg := newFakeRegistry(t)
	addr := freeAddr(t)
	p := startProvider(t, ns, withEnv("SP_SERVER_ADDRESS="+addr, "SP_ENDPOINT=https://"+addr, "DCM_REGISTRATION_URL="+reg.URL,
		"SP_API_TOKEN_FILE="+tokenFile, "SP_SERVER_TLS_CERT_FILE="+certFile, "SP_SERVER_TLS_KEY_FILE="+keyFile))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: authority.Pool},
		DisableKeepAlives: true, // a new handshake per request: the served certificate is current
	}}
	base := "https://" + addr
	containers := base + "/api/v1alpha1/containers"
	p.waitSynced(t)

	// Plain HTTP gets no API.
	if r := do(t, http.MethodGet, "http://"+addr+"/api/v1alpha1/containers", nil); r.Status != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port: %d %s", r.Status, r.Body)
	}

	// Open without a token.
	for _, path := range []string{"/health", "/api/v1alpha1/containers/health", "/metrics"} {
		if r := call(t, client, http.MethodGet, base+path, "", nil); r.Status != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s", path, r.Status, r.Body)
		}
	}
	if r := call(t, client, http.MethodGet, base+"/health", "", nil); r.JSON["status"] == nil {
		t.Errorf("health over HTTPS: %s", r.Body)
	}
	for _, path := range []string{"/readyz", "/livez"} { // 503 until ready, but never 401
		if r := call(t, client, http.MethodGet, base+path, "", nil); r.Status == http.StatusUnauthorized {
			t.Errorf("GET %s without a token: 401", path)
		}
	}

	// Without the right token: 401, and nothing is created.
	for _, tok := range []string{"", "wrong-token"} {
		r := call(t, client, http.MethodPost, containers+"?id=web-1", tok, spec("web", "nginx:1.27"))
		expectProblem(t, r, http.StatusUnauthorized, "unauthenticated")
		if r.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
		}
	}
	expectProblem(t, call(t, client, http.MethodGet, containers, "", nil), http.StatusUnauthorized, "unauthenticated")
	deps, err := cs.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) > 0 {
		t.Fatalf("a refused create left %d Deployments", len(deps.Items))
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName("web-1"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create left a record (or: %v)", err)
	}

	// With the token, over HTTPS.
	r := call(t, client, http.MethodPost, containers+"?id=web-1", "first-token", spec("web", "nginx:1.27"))
	if r.Status != http.StatusCreated {
		t.Fatalf("create with the token: %d %s", r.Status, r.Body)
	}
	if got := r.Header.Get("X-Test-Served-Certificate"); got != "one" {
		t.Errorf("served certificate %q, want one", got)
	}
	if r := call(t, client, http.MethodGet, containers+"/web-1", "first-token", nil); r.Status != http.StatusOK {
		t.Errorf("get with the token: %d %s", r.Status, r.Body)
	}
	expectProblem(t, call(t, client, http.MethodDelete, containers+"/web-1", "", nil), http.StatusUnauthorized, "unauthenticated")

	// The self probe reached our HTTPS listener, so the provider registered its https
	// endpoint.
	testenv.Eventually(t, 30*time.Second, "registered", func() error {
		if st := p.App.Registrar().State(); st.Phase != registration.Registered {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	reg.mu.Lock()
	endpoint := reg.last["endpoint"]
	reg.mu.Unlock()
	if endpoint != "https://"+addr+"/api/v1alpha1/containers" {
		t.Errorf("registered endpoint %v", endpoint)
	}

	// Rotation without a restart: the new token and certificate are used within the
	// files' check interval, the old token is refused.
	testpki.WriteAtomically(t, tokenFile, []byte("second-token"))
	authority.WritePair(t, "two", certFile, keyFile)
	testenv.Eventually(t, 15*time.Second, "rotated token and certificate in use", func() error {
		r := call(t, client, http.MethodGet, containers, "second-token", nil)
		if r.Status != http.StatusOK {
			return fmt.Errorf("list with the new token: %d %s", r.Status, r.Body)
		}
		if got := r.Header.Get("X-Test-Served-Certificate"); got != "two" {
			return fmt.Errorf("served certificate %q", got)
		}
		return nil
	})
	expectProblem(t, call(t, client, http.MethodGet, containers, "first-token", nil), http.StatusUnauthorized, "unauthenticated")
	if r := call(t, client, http.MethodDelete, containers+"/web-1", "second-token", nil); r.Status != http.StatusNoContent {
		t.Errorf("delete with the new token: %d %s", r.Status, r.Body)
	}
}
