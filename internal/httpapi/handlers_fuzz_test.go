package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/oapi-codegen/runtime"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// takenID is the id the fuzzed store already holds: a valid create with it is 409.
const takenID = "taken-1"

// maxProblemBytes bounds an error answer, whatever the request (up to MaxBodyBytes):
// a problem names what is wrong, it does not echo the request.
const maxProblemBytes = 64 << 10

// FuzzCreateRequest sends arbitrary bytes as the body of POST
// /api/v1alpha1/containers?id=<id> (no id parameter when id is empty) through the
// whole stack over an in-memory store that already holds takenID. The answer is 201,
// 400, 409 or 413 (nothing else is possible without a cluster: no 5xx, no panic); an
// error is a problem+json of its status, bounded in size, that leaks no cause, and
// creates nothing; 201 only for an id and spec the domain accepts, creating exactly
// that id. The seed corpus is testdata/fuzz/FuzzCreateRequest.
func FuzzCreateRequest(f *testing.F) {
	f.Add("web-1", []byte(validBody))
	f.Add("", []byte(validBody))
	f.Add(takenID, []byte(validBody))
	f.Add("health", []byte(body(`"cpu":{"min":1,"max":1}`, `"cpu":{"min":"10","max":"5"}`)))
	f.Add("web-1", []byte(body(`"name":"web"`, `"name":"web","labels":{"dcm.project/managed-by":"y"}`)))
	f.Add("web-1", []byte(validBody+"garbage"))
	f.Add("web-1", []byte(`{"spec":{"service_type":"container","service_type":"vm"}}`))
	f.Add("Bad_ID", []byte(`[]`))

	st := &memStore{}
	h, err := NewHandler(Options{
		Store:   st,
		Objects: container.Options{Namespace: "dcm"},
		Health:  func(context.Context) error { return nil },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, id string, reqBody []byte) {
		st.reset(takenID)
		target := createPath
		if id != "" {
			target += "?id=" + url.QueryEscape(id)
		}
		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(reqBody))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if !slices.Contains([]int{201, 400, 409, 413}, rec.Code) {
			t.Fatalf("status %d: %.2000s", rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), secret) {
			t.Fatalf("the answer leaks a cause: %.2000s", rec.Body)
		}
		if rec.Code >= 400 {
			checkFuzzProblem(t, rec)
			if created := st.created(); len(created) > 0 {
				t.Fatalf("%d, yet the store created %q", rec.Code, created)
			}
			if rec.Code == http.StatusConflict && id != takenID {
				t.Fatalf("409 for id %q, which the store does not hold", id)
			}
			return
		}

		// 201: the id and the spec are ones the domain accepts, and that id was created.
		sent, err := asTheHandlerReadsIt(reqBody)
		if err != nil {
			t.Fatalf("201 for a body that does not decode as a container: %v", err)
		}
		if vs := container.Validate(&sent.Spec, container.Policy{}); len(vs) > 0 {
			t.Fatalf("201 for a spec Validate refuses: %q", vs)
		}
		if id != "" {
			if vs := container.ValidateID("id", id); len(vs) > 0 {
				t.Fatalf("201 for an id ValidateID refuses: %q", vs)
			}
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("201 with Content-Type %q", ct)
		}
		// The answer echoes the spec, re-encoded (HTML-escaped: one byte may become six).
		if limit := 6*len(reqBody) + 4096; rec.Body.Len() > limit {
			t.Errorf("201 of %d bytes for a request of %d", rec.Body.Len(), len(reqBody))
		}
		var got v1alpha1.Container
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("201 body does not decode as a container: %v: %.2000s", err, rec.Body)
		}
		if got.Id == nil || (id != "" && *got.Id != id) {
			t.Fatalf("201 for id %q answers id %v", id, got.Id)
		}
		if created := st.created(); !slices.Equal(created, []string{*got.Id}) {
			t.Errorf("201 for %q, the store created %q", *got.Id, created)
		}
		if got.Status == nil || *got.Status != v1alpha1.PENDING || got.Spec.Metadata.Name != sent.Spec.Metadata.Name {
			t.Errorf("201 answers status %v name %q for name %q", got.Status, got.Spec.Metadata.Name, sent.Spec.Metadata.Name)
		}
	})
}

// asTheHandlerReadsIt decodes a create body the way the stack does: the validator
// decodes it (encoding/json, numbers kept as written, the last of duplicate members
// wins) and the generated handler binds that value with exact member names, falling
// back to encoding/json (whose member names match case-insensitively) when it does not
// bind. {"Reference": …} beside {"reference": …} never gets that far: the schema refuses
// a member it does not know (400).
func asTheHandlerReadsIt(b []byte) (v1alpha1.Container, error) {
	var c v1alpha1.Container
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return c, err
	}
	if runtime.BindJSONValue(value, &c) == nil {
		return c, nil
	}
	err := json.Unmarshal(b, &c)
	return c, err
}

// checkFuzzProblem checks an error answer: application/problem+json, a body that
// decodes as the contract's Problem (nothing else in it) with the answer's status, a
// type and title, a detail, the request path as instance, and a bounded size.
func checkFuzzProblem(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%d with Content-Type %q: %.2000s", rec.Code, ct, rec.Body)
	}
	if rec.Body.Len() > maxProblemBytes {
		t.Fatalf("%d answer of %d bytes (bound %d): %.300s…", rec.Code, rec.Body.Len(), maxProblemBytes, rec.Body)
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	var p v1alpha1.Problem
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%d body is not a Problem: %v: %.2000s", rec.Code, err, rec.Body)
	}
	if p.Status != rec.Code || !strings.HasPrefix(p.Type, ProblemTypeBase) || p.Title == "" ||
		p.Detail == nil || *p.Detail == "" || p.Instance == nil || *p.Instance != createPath {
		t.Fatalf("%d answered with problem %+v: %.2000s", rec.Code, p, rec.Body)
	}
	if p.Errors != nil {
		if len(*p.Errors) < 2 || *p.Detail != multipleDetail || p.Pointer != nil {
			t.Errorf("errors array of %d without the fixed detail, or with a pointer: %.2000s", len(*p.Errors), rec.Body)
		}
		for _, e := range *p.Errors {
			if e.Detail == "" || (e.Pointer != nil && !strings.HasPrefix(*e.Pointer, "#")) {
				t.Errorf("errors entry %+v: %.2000s", e, rec.Body)
			}
		}
	}
	if p.Pointer != nil && !strings.HasPrefix(*p.Pointer, "#") {
		t.Errorf("pointer %q is not a JSON pointer fragment", *p.Pointer)
	}
}

// memStore is the fuzzed cluster: it remembers which ids it holds, refuses a taken one
// as the store does (a conflict whose cause must not leak), and answers a create as
// fakeStore does (the objects as the cluster would hold them).
type memStore struct {
	fakeStore
	mu    sync.Mutex
	held  map[string]bool
	added []string
}

func (s *memStore) reset(held ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fakeStore = fakeStore{a: &answer{}}
	s.held, s.added = map[string]bool{}, nil
	for _, id := range held {
		s.held[id] = true
	}
}

func (s *memStore) created() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.added)
}

func (s *memStore) Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[id] {
		return container.Observed{}, storeErr(kubeerr.KindConflict).err
	}
	s.held[id] = true
	s.added = append(s.added, id)
	return s.fakeStore.Create(ctx, id, objs)
}
