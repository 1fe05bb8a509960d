package imageregistry

import (
	"archive/tar"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestMirrorPath(t *testing.T) {
	const self = "127.0.0.1:5000"
	for _, tc := range []struct {
		path, ns, want string
		ok             bool
	}{
		{"/v2/library/nginx/manifests/alpine", "docker.io", "/v2/docker.io/library/nginx/manifests/alpine", true},
		{"/v2/example/hello/blobs/sha256:ab", "quay.io", "/v2/quay.io/example/hello/blobs/sha256:ab", true},
		{"/v2/team/app/manifests/v1", "", "/v2/team/app/manifests/v1", false},   // a pull of this registry's own name
		{"/v2/team/app/manifests/v1", self, "/v2/team/app/manifests/v1", false}, // containerd never sends it, but harmless
		{"/v2/", "docker.io", "/v2/", false},                                    // the version check
		{"/other/library/nginx", "docker.io", "/other/library/nginx", false},    // not the registry API
	} {
		got, ok := MirrorPath(tc.path, tc.ns, self)
		if got != tc.want || ok != tc.ok {
			t.Errorf("MirrorPath(%q, %q) = %q, %v; want %q, %v", tc.path, tc.ns, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRequested(t *testing.T) {
	for path, want := range map[string]string{
		"/v2/docker.io/library/nginx/manifests/alpine":      "docker.io/library/nginx:alpine",
		"/v2/quay.io/a/b/manifests/sha256:0123456789abcdef": "quay.io/a/b@sha256:0123456789abcdef",
		"/v2/x/blobs/sha256:00":                             "/v2/x/blobs/sha256:00",
	} {
		if got := Requested(path); got != want {
			t.Errorf("Requested(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestLocalName(t *testing.T) {
	const self = "127.0.0.1:5000"
	for _, tc := range []struct{ ref, want, err string }{
		{ref: "nginx:alpine", want: self + "/docker.io/library/nginx:alpine"},
		{ref: "docker.io/library/nginx:alpine", want: self + "/docker.io/library/nginx:alpine"},
		{ref: "quay.io/example/hello:v1", want: self + "/quay.io/example/hello:v1"},
		{ref: "example.invalid/web:v1", want: self + "/example.invalid/web:v1"},
		{ref: "registry.k8s.io/pause:3.10", want: self + "/registry.k8s.io/pause:3.10"},
		{ref: "busybox", want: self + "/docker.io/library/busybox:latest"},
		{ref: self + "/team/app:v1", want: self + "/team/app:v1"}, // already this registry's
		{ref: "quay.io/a/b@sha256:" + strings.Repeat("a", 64), want: self + "/quay.io/a/b@sha256:" + strings.Repeat("a", 64)},
		{ref: "Team/App:v1", err: "is not an image reference"},
		{ref: "", err: "is not an image reference"},
	} {
		got, err := LocalName(tc.ref, self)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("LocalName(%q) = %v, %v; want error %q", tc.ref, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("LocalName(%q): %v", tc.ref, err)
		case got.String() != tc.want:
			t.Errorf("LocalName(%q) = %s, want %s", tc.ref, got, tc.want)
		}
	}
}

// serve runs the registry on a loopback port and returns its address ("127.0.0.1:PORT").
func serve(t *testing.T) (string, *syncBuilder) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	self := srv.Listener.Addr().String()
	log := &syncBuilder{}
	srv.Config.Handler = New(self, t.TempDir(), log)
	srv.Start()
	t.Cleanup(srv.Close)
	return self, log
}

// syncBuilder is the registry's log, read by the test while the server may still write.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mirrorHEAD asks as containerd does for a name of another registry: /v2/REPO/manifests/TAG?ns=HOST.
func mirrorHEAD(t *testing.T, self, repo, tag, ns string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodHead, "http://"+self+"/v2/"+repo+"/manifests/"+tag+"?ns="+ns, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestPushedUnderItsRealNameIsServedToContainerd(t *testing.T) {
	self, _ := serve(t)
	img, err := random.Image(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "nginx.tar")
	tag, _ := name.NewTag("nginx:alpine")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	local, err := Push(context.Background(), tarPath, "docker.io/library/nginx:alpine", self)
	if err != nil {
		t.Fatal(err)
	}
	if want := self + "/docker.io/library/nginx:alpine"; local.String() != want {
		t.Errorf("pushed to %s, want %s", local, want)
	}
	want, _ := img.Digest()
	resp := mirrorHEAD(t, self, "library/nginx", "alpine", "docker.io")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != want.String() {
		t.Errorf("containerd's request: %s, digest %q; want 200, %s", resp.Status, resp.Header.Get("Docker-Content-Digest"), want)
	}
	// The blobs come through the same mirror path.
	cfg, _ := img.ConfigName()
	bresp, err := http.Get("http://" + self + "/v2/library/nginx/blobs/" + cfg.String() + "?ns=docker.io")
	if err != nil {
		t.Fatal(err)
	}
	bresp.Body.Close()
	if bresp.StatusCode != http.StatusOK {
		t.Errorf("config blob through the mirror path: %s", bresp.Status)
	}
}

func TestANameNotHereIsRefusedNamingThisRegistry(t *testing.T) {
	self, log := serve(t)
	resp := mirrorHEAD(t, self, "example/never-pushed", "v1", "quay.io")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("HEAD of a name not here: %s, want 403 (containerd then names this host)", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+self+"/v2/example/never-pushed/manifests/v1?ns=quay.io", nil)
	gresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(gresp.Body)
	gresp.Body.Close()
	if !strings.Contains(string(body), `"DENIED"`) || !strings.Contains(string(body), "quay.io/example/never-pushed:v1 is not in this machine's image registry "+self) {
		t.Errorf("GET body %s", body)
	}
	if !strings.Contains(log.String(), "(a pull of quay.io/example/never-pushed:v1) refused") {
		t.Errorf("the log does not show the refused pull:\n%s", log)
	}
	// A name of this registry itself that is not here is a plain 404, as any registry.
	own, err := http.Head("http://" + self + "/v2/team/app/manifests/v1")
	if err != nil {
		t.Fatal(err)
	}
	own.Body.Close()
	if own.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of an own name not here: %s, want 404", own.Status)
	}
}

// An index in an OCI layout (what make image writes), as a folder or as a tar of one,
// is pushed whole: containerd picks its platform.
func TestPushAnIndexFromAnOCILayout(t *testing.T) {
	self, _ := serve(t)
	img, _ := random.Image(128, 1)
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "layout.tar")
	writeTar(t, tarPath, dir)
	want, _ := idx.Digest()
	for _, src := range []string{dir, tarPath} {
		local, err := Push(context.Background(), src, self+"/team/app:v1", self)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := remote.Head(local)
		if err != nil {
			t.Fatal(err)
		}
		if got.Digest != want || !got.MediaType.IsIndex() {
			t.Errorf("%s: pushed %s %s, want the index %s", src, got.MediaType, got.Digest, want)
		}
	}
}

// Bad input: one clear error each, and no name appears in the registry.
func TestPushBadInput(t *testing.T) {
	self, _ := serve(t)
	dir := t.TempDir()
	notTar := filepath.Join(dir, "notes.txt")
	_ = os.WriteFile(notTar, []byte("hello"), 0o644)
	otherTar := filepath.Join(dir, "other.tar")
	writeTar(t, otherTar, t.TempDir()) // an empty tar: no index.json, no manifest.json
	img, _ := random.Image(64, 1)
	good := filepath.Join(dir, "good.tar")
	tag, _ := name.NewTag("team/app:v1")
	_ = tarball.WriteToFile(good, tag, img)
	down := "127.0.0.1:1"

	for _, tc := range []struct{ name, src, ref, registry, err string }{
		{"not a tar", notTar, "team/app:v1", self, "is not an image: not a tar file"},
		{"a tar that is not an image", otherTar, "team/app:v1", self, "neither index.json (OCI layout) nor manifest.json"},
		{"missing file", filepath.Join(dir, "nope.tar"), "team/app:v1", self, "no such file"},
		{"a name that is not a reference", good, "Team/App:v1", self, `"Team/App:v1" is not an image reference`},
		{"registry down", good, "team/app:v1", down, "the image registry 127.0.0.1:1 is not answering"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Push(context.Background(), tc.src, tc.ref, tc.registry)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Push: %v; want %q", err, tc.err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
		})
	}
	repos, err := catalog(self)
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 0 {
		t.Errorf("the registry holds %v after only failed pushes", repos)
	}
}

func catalog(self string) ([]string, error) {
	reg, err := name.NewRegistry(self, name.Insecure)
	if err != nil {
		return nil, err
	}
	return remote.Catalog(context.Background(), reg)
}

func writeTar(t *testing.T, dst, dir string) {
	t.Helper()
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
