package httpapi

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// HEAD on every GET route answers as HTTP says (RFC 9110 §9.3.2): the status and
// headers the GET gets, Content-Length the GET's body length, and no body.
func TestHeadAnswersEveryGetRoute(t *testing.T) {
	const base = "/api/v1alpha1/containers"
	one := &answer{obs: []container.Observed{observed(t, "a")}}
	cases := []struct {
		name, target string
		store        *answer
		status       int
	}{
		{"list", base, &answer{obs: []container.Observed{observed(t, "a"), observed(t, "b")}}, 200},
		{"list with a bad page size", base + "?max_page_size=-1", nil, 400},
		{"one container", base + "/a", one, 200},
		{"a container that is not there", base + "/a", fails(store.ErrNotFound), 404},
		{"a malformed id", base + "/Bad_ID", nil, 400},
		{"health", base + "/health", nil, 200},
		{"root health", "/health", nil, 200},
		{"no such path", "/nope", nil, 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHandler(Options{
				Store: fakeStore{t: t, a: tc.store}, Objects: container.Options{Namespace: "dcm"},
				Health: func(context.Context) error { return nil }, Version: "v1", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			get, head := httptest.NewRecorder(), httptest.NewRecorder()
			h.ServeHTTP(get, httptest.NewRequest(http.MethodGet, tc.target, nil))
			h.ServeHTTP(head, httptest.NewRequest(http.MethodHead, tc.target, nil))
			if get.Code != tc.status || head.Code != tc.status {
				t.Fatalf("GET %d, HEAD %d, want %d", get.Code, head.Code, tc.status)
			}
			if head.Body.Len() != 0 {
				t.Errorf("HEAD has a body: %s", head.Body)
			}
			if cl := head.Header().Get("Content-Length"); cl != strconv.Itoa(get.Body.Len()) {
				t.Errorf("HEAD Content-Length %q, the GET's body is %d bytes", cl, get.Body.Len())
			}
			for _, k := range slices.Sorted(maps.Keys(get.Header())) {
				if k == "X-Request-Id" {
					continue
				}
				if g, h := get.Header().Get(k), head.Header().Get(k); g != h {
					t.Errorf("%s: GET %q, HEAD %q", k, g, h)
				}
			}
		})
	}
}

// Through a real server: what goes over the wire, and HEAD needs the token GET needs.
func TestHeadOverTheWire(t *testing.T) {
	h, err := NewHandler(Options{
		Store: fakeStore{t: t, a: &answer{obs: []container.Observed{observed(t, "a")}}}, Objects: container.Options{Namespace: "dcm"},
		Health: func(context.Context) error { return nil }, APIToken: func() []byte { return []byte("tok") },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/api/v1alpha1/containers/a", "tok", 200},
		{"/api/v1alpha1/containers/a", "", 401},
		{"/health", "", 200},
	} {
		req, _ := http.NewRequest(http.MethodHead, srv.URL+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || len(b) != 0 || resp.ContentLength <= 0 {
			t.Errorf("HEAD %s: %d, %d body bytes, Content-Length %d; want %d, none, the GET's", tc.path, resp.StatusCode, len(b), resp.ContentLength, tc.status)
		}
	}
}
