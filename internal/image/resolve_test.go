package image

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testRegistry is go-containerregistry's registry on 127.0.0.1, counting the manifest
// requests it serves as a mirror (pushes go to it directly).
type testRegistry struct {
	host      string // 127.0.0.1:port
	manifests atomic.Int64
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.Contains(req.URL.Path, "/manifests/") && req.URL.Query().Has("ns") {
			r.manifests.Add(1)
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *testRegistry) push(t *testing.T, repoTag string, img v1.Image) v1.Hash {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (r *testRegistry) pushIndex(t *testing.T, repoTag string, ix v1.ImageIndex) v1.Hash {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, ix); err != nil {
		t.Fatal(err)
	}
	d, err := ix.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mirrorAll resolves every registry through r, as the nodes of the harness do.
func (r *testRegistry) mirrorAll(t *testing.T, o Options) *Resolver {
	t.Helper()
	o.Mirrors = map[string]string{"*": "http://" + r.host}
	res, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func randomImage(t *testing.T, size int64) v1.Image {
	t.Helper()
	img, err := random.Image(size, 1)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func withLayer(t *testing.T, a mutate.Addendum) v1.Image {
	t.Helper()
	l, err := random.Layer(64, types.DockerLayer)
	if err != nil {
		t.Fatal(err)
	}
	a.Layer = l
	img, err := mutate.Append(empty.Image, a)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestResolvePinsATagToItsDigest(t *testing.T) {
	reg := newTestRegistry(t)
	d := reg.push(t, "example/app:v1", randomImage(t, 100))
	r := reg.mirrorAll(t, Options{})
	for _, ref := range []string{"quay.io/example/app:v1", "quay.io/example/app:v1@" + d.String(), "quay.io/example/app@" + d.String()} {
		got, err := r.Resolve(context.Background(), ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if want := "quay.io/example/app@" + d.String(); got.Pinned != want || got.Digest != d.String() {
			t.Errorf("%s: got %+v, want %s", ref, got, want)
		}
	}
	// A short Docker Hub name is pinned fully qualified.
	reg.push(t, "library/nginx:latest", randomImage(t, 100))
	got, err := r.Resolve(context.Background(), "nginx")
	if err != nil || !strings.HasPrefix(got.Pinned, "docker.io/library/nginx@sha256:") {
		t.Errorf("nginx: got %+v, %v", got, err)
	}
}

func TestResolveFollowsAMovedTagAndChecksEachDigestOnce(t *testing.T) {
	reg := newTestRegistry(t)
	r := reg.mirrorAll(t, Options{})
	first := reg.push(t, "example/app:v1", randomImage(t, 100))
	for range 3 {
		got, err := r.Resolve(context.Background(), "quay.io/example/app:v1")
		if err != nil || got.Digest != first.String() {
			t.Fatalf("got %+v, %v; want %s", got, err, first)
		}
	}
	// One HEAD each, and one GET for the check of the first.
	if n := reg.manifests.Load(); n != 4 {
		t.Errorf("%d manifest requests for three resolutions of one digest, want 4", n)
	}
	second := reg.push(t, "example/app:v1", randomImage(t, 100))
	got, err := r.Resolve(context.Background(), "quay.io/example/app:v1")
	if err != nil || got.Digest != second.String() {
		t.Fatalf("after the tag moved: got %+v, %v; want %s", got, err, second)
	}
}

func TestResolveRefuses(t *testing.T) {
	reg := newTestRegistry(t)
	good := randomImage(t, 100)
	bad := withLayer(t, mutate.Addendum{URLs: []string{"http://127.0.0.1:1/probe-blob"}})
	foreign := withLayer(t, mutate.Addendum{MediaType: types.DockerForeignLayer})
	reg.push(t, "example/urls:v1", bad)
	reg.push(t, "example/foreign:v1", foreign)
	reg.push(t, "example/big:v1", randomImage(t, 4096))
	platform := func(img v1.Image, os, arch string) mutate.IndexAddendum {
		return mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: os, Architecture: arch}}}
	}
	reg.pushIndex(t, "example/multi-bad:v1", mutate.AppendManifests(empty.Index, platform(good, "linux", "amd64"), platform(bad, "linux", "arm64")))
	reg.pushIndex(t, "example/multi-urls:v1", mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: good,
		Descriptor: v1.Descriptor{URLs: []string{"http://10.0.0.1/x"}, Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}}))
	r := reg.mirrorAll(t, Options{MaxBytes: 2048})
	for ref, rule := range map[string]string{
		"quay.io/example/urls:v1":       RuleForeignURLs,
		"quay.io/example/foreign:v1":    RuleNonDistributable,
		"quay.io/example/big:v1":        RuleTooLarge,
		"quay.io/example/multi-bad:v1":  RuleForeignURLs,
		"quay.io/example/multi-urls:v1": RuleForeignURLs,
	} {
		for range 2 { // the second from the cache of checked digests
			_, err := r.Resolve(context.Background(), ref)
			if got, ok := Refused(err); !ok || got.Rule != rule {
				t.Errorf("%s: got %v, want a refusal by %s", ref, err, rule)
			}
		}
	}
}

func TestResolveSkipsAttestationsInAnIndex(t *testing.T) {
	reg := newTestRegistry(t)
	bad := withLayer(t, mutate.Addendum{URLs: []string{"http://127.0.0.1:1/probe-blob"}})
	ix := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: randomImage(t, 100), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: bad, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}})
	d := reg.pushIndex(t, "example/multi:v1", ix)
	got, err := reg.mirrorAll(t, Options{}).Resolve(context.Background(), "ghcr.io/example/multi:v1")
	if err != nil || got.Digest != d.String() {
		t.Fatalf("got %+v, %v; want %s", got, err, d)
	}
}

func TestResolveCannotTellYet(t *testing.T) {
	reg := newTestRegistry(t)
	r := reg.mirrorAll(t, Options{})
	_, err := r.Resolve(context.Background(), "quay.io/example/never-pushed:v1")
	if _, refused := Refused(err); err == nil || refused {
		t.Errorf("an unknown tag: got %v, want an error that may pass", err)
	}
	d := reg.push(t, "example/app:v1", randomImage(t, 100))
	other := reg.push(t, "example/other:v1", randomImage(t, 100))
	_, err = r.Resolve(context.Background(), "quay.io/example/app:v1@"+other.String())
	if _, refused := Refused(err); err == nil || refused {
		t.Errorf("a tag whose digest is not the one given (%s): got %v", d, err)
	}
}

func TestResolveSkipsListedRegistries(t *testing.T) {
	r, err := New(Options{Skip: []string{"kind.local"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Resolve(context.Background(), "kind.local/app:dev")
	if err != nil || got.Pinned != "kind.local/app:dev" || got.Digest != "" {
		t.Errorf("got %+v, %v", got, err)
	}
}

func TestResolveDialsOnlyPublicAddressesUnlessTrusted(t *testing.T) {
	reg := newTestRegistry(t)
	d := reg.push(t, "example/app:v1", randomImage(t, 100))
	ref := reg.host + "/example/app:v1"
	untrusted, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusted.Resolve(context.Background(), ref); err == nil || !strings.Contains(err.Error(), "not a public address") {
		t.Errorf("a loopback registry nobody listed: got %v, want a refused dial", err)
	}
	trusted, err := New(Options{Trusted: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := trusted.Resolve(context.Background(), ref); err != nil || got.Digest != d.String() {
		t.Errorf("a registry the operator listed: got %+v, %v", got, err)
	}
}
