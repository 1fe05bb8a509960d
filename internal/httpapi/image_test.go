package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/image"
)

type fakeResolver struct{ err error }

const resolvedDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func (f fakeResolver) Resolve(_ context.Context, ref string) (image.Resolved, error) {
	if f.err != nil {
		return image.Resolved{}, f.err
	}
	return image.Resolved{Pinned: "docker.io/library/nginx@" + resolvedDigest, Digest: resolvedDigest}, nil
}

// A create resolves its image: pinned and echoed with its digest; refused with a 400
// naming the rule and nothing made; not resolvable yet, 201 with the Deployment held.
func TestCreateResolvesTheImage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		code     int
		podImage string
		replicas int32
		says     string
	}{
		{"resolved", nil, http.StatusCreated, "docker.io/library/nginx@" + resolvedDigest, 1, `"digest":"` + resolvedDigest},
		{"refused", &image.Refusal{Rule: image.RuleForeignURLs, Detail: "layer 0 names http://10.0.0.1/x"}, http.StatusBadRequest, "", 0, "foreign-urls"},
		{"not yet", errors.New("MANIFEST_UNKNOWN"), http.StatusCreated, "nginx", 0, `"reference":"nginx"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &keepingStore{}
			h, err := NewHandler(Options{Store: st, Health: func(context.Context) error { return nil },
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Images: fakeResolver{tc.err}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=c1", strings.NewReader(goodBody))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.says) {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if tc.code != http.StatusCreated {
				if st.obs.Deployment != nil {
					t.Error("a refused create reached the store")
				}
				return
			}
			var got map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &got)
			if ref := got["spec"].(map[string]any)["image"].(map[string]any)["reference"]; ref != "nginx" {
				t.Errorf("reference %v, want it as sent", ref)
			}
			if d := st.obs.Deployment; d.Container.Digest != strings.TrimPrefix(tc.podImage, "docker.io/library/nginx@") && tc.replicas == 1 ||
				(tc.replicas == 0) != (d.ImagePending != "") {
				t.Errorf("Deployment %+v", d)
			}
		})
	}
}
