package image

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push puts the whole index in a registry (ggcr's in-memory one, on 127.0.0.1, spoken to
// over plain HTTP); a bad reference or a registry that is down is one line.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	idx, _ := fakeIndex(t, "v1.0.0")
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		ref     string
		wantErr string
	}{
		{name: "local registry", ref: host + "/dcm-project/k8s-container-service-provider:v1.0.0"},
		{name: "the name of a public image", ref: host + "/library/nginx:alpine"},
		{name: "no tag", ref: host + "/dcm/sp", wantErr: "is not registry/repository:tag"},
		{name: "registry down", ref: "127.0.0.1:1/dcm/sp:v1", wantErr: "pushing 127.0.0.1:1/dcm/sp:v1: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := Push(ctx, idx, tc.ref)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line containing %q", err, tc.wantErr)
				}
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ref, err := name.ParseReference(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := remote.Index(ref, remote.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := got.Digest(); d != want {
				t.Errorf("the registry has %s, want %s", d, want)
			}
			im, err := got.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range im.Manifests {
				img, err := got.Image(m.Digest)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := img.Layers(); err != nil {
					t.Errorf("%s: %v", m.Platform, err)
				}
			}
		})
	}
}
