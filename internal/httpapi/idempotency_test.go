package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// keyStore records what a create reached the store with.
type keyStore struct {
	panicStore
	ids  []string
	reqs []container.Request
	err  error
}

func (s *keyStore) Create(_ context.Context, id string, objs container.Objects) (container.Observed, error) {
	s.ids, s.reqs = append(s.ids, id), append(s.reqs, objs.Request)
	if s.err != nil {
		return container.Observed{}, s.err
	}
	return allocated(objs).Observed(), nil
}

const bareSpec = `{"service_type":"container","metadata":{"name":"web"},"image":{"reference":"nginx"},
 "resources":{"cpu":{"min":1,"max":1},"memory":{"min":"1MB","max":"1MB"}}}`

// The agent's create: the bare spec with an Idempotency-Key and no id. The same spec
// with or without the wrapper, in another member order, is the same request (one
// digest); the key names the id; a bad key is a 400 naming the header; a key the store
// says another spec used is a 422 naming it.
func TestAgentShapedCreate(t *testing.T) {
	st := &keyStore{}
	h, err := NewHandler(Options{Store: st, Health: func(context.Context) error { return nil }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	post := func(query, body string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers"+query, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	reordered := `{"resources":{"memory":{"max":"1MB","min":"1MB"},"cpu":{"max":1,"min":1}},"image":{"reference":"nginx"},
 "metadata":{"name":"web"},"service_type":"container"}`
	for _, body := range []string{bareSpec, goodBody, reordered} {
		if rec := post("", body, "Idempotency-Key", "event-1"); rec.Code != http.StatusCreated {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	if rec := post("", bareSpec, "Idempotency-Key", `"event-1"`); rec.Code != http.StatusCreated {
		t.Fatalf("quoted key: %d %s", rec.Code, rec.Body)
	}
	want := container.IDForKey("event-1")
	for i, id := range st.ids {
		if id != want || st.reqs[i] != st.reqs[0] || st.reqs[i].Key != "event-1" || st.reqs[i].Digest == "" {
			t.Errorf("create %d reached the store as %s %+v, want id %s and the first's request %+v", i, id, st.reqs[i], want, st.reqs[0])
		}
	}
	var c map[string]any
	rec := post("?id=db", bareSpec)
	_ = json.Unmarshal(rec.Body.Bytes(), &c)
	if rec.Code != http.StatusCreated || c["id"] != "db" || st.reqs[len(st.reqs)-1] != (container.Request{}) {
		t.Errorf("a bare spec with an id and no key: %d %s, request %+v", rec.Code, rec.Body, st.reqs[len(st.reqs)-1])
	}

	n := len(st.ids)
	for _, bad := range []string{strings.Repeat("k", 256), "caf\u00e9", `""`} {
		rec := post("", bareSpec, "Idempotency-Key", bad)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Idempotency-Key") {
			t.Errorf("key %q: %d %s", bad, rec.Code, rec.Body)
		}
	}
	if len(st.ids) != n {
		t.Errorf("a bad key reached the store")
	}

	st.err = &kubeerr.Error{Kind: kubeerr.KindKeyReused, Message: `Idempotency-Key "event-1" was used by a create with another spec`}
	rec = post("", bareSpec, "Idempotency-Key", "event-1")
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "idempotency-key-reused") || !strings.Contains(rec.Body.String(), `"title":"Idempotency key reused"`) || !strings.Contains(rec.Body.String(), `\"event-1\"`) {
		t.Errorf("key reused: %d %s", rec.Code, rec.Body)
	}
}
