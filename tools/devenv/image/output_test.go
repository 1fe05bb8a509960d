package image

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// fakeIndex is an index like Build's, with a few bytes in place of each binary: what the
// output and push code needs, without a go build.
func fakeIndex(t *testing.T, version string) (v1.ImageIndex, []v1.Image) {
	t.Helper()
	labels := Labels(version, "0123456789abcdef0123456789abcdef01234567")
	base, err := layerOf(baseEntries([]byte("PEM")))
	if err != nil {
		t.Fatal(err)
	}
	var imgs []v1.Image
	for _, p := range supported {
		bin, err := layerOf(binaryEntries([]byte("binary for " + p.String())))
		if err != nil {
			t.Fatal(err)
		}
		img, err := platformImage(p, base, bin, labels)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	return index(supported, imgs, labels), imgs
}

// extract unpacks the tar at path into a new folder, checking every entry's header.
func extract(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v owner %d:%d", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOutputs reads the layout folder and the tarball with ggcr's own readers: the
// layout's index.json names the index by tag; the tarball's manifest.json view is the
// first image (same config and layers); the tarball is the layout (extracted, it reads
// as the same index). With validate, ggcr also checks every blob against its digest
// (slow under -race with real binaries).
func checkOutputs(t *testing.T, layoutDir, tarPath string, tag name.Tag, idx v1.ImageIndex, first v1.Image, deep bool) {
	t.Helper()
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for what, dir := range map[string]string{"layout folder": layoutDir, "extracted tarball": extract(t, tarPath)} {
		p, err := layout.FromPath(dir)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		top, err := p.ImageIndex()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		im, err := top.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 || im.Manifests[0].Digest != want ||
			im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tag.String() ||
			im.Manifests[0].Annotations["io.containerd.image.name"] != tag.String() {
			t.Fatalf("%s: index.json %+v, want one descriptor of %s named %s", what, im.Manifests, want, tag)
		}
		got, err := top.ImageIndex(want)
		if err != nil {
			t.Fatal(err)
		}
		if gd, _ := got.Digest(); gd != want {
			t.Errorf("%s: index %s, want %s", what, gd, want)
		}
		if deep {
			if err := validate.Index(got); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	}

	img, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatalf("the tarball as a docker archive: %v", err)
	}
	if deep {
		if err := validate.Image(img); err != nil {
			t.Errorf("the tarball as a docker archive: %v", err)
		}
	}
	gotCfg, _ := img.RawConfigFile()
	wantCfg, _ := first.RawConfigFile()
	if !bytes.Equal(gotCfg, wantCfg) {
		t.Errorf("manifest.json's config is not the first image's")
	}
	gotLayers, _ := img.Layers()
	wantLayers, _ := first.Layers()
	if len(gotLayers) != len(wantLayers) {
		t.Fatalf("manifest.json has %d layers, want %d", len(gotLayers), len(wantLayers))
	}
	for i := range gotLayers {
		g, _ := gotLayers[i].Digest()
		w, _ := wantLayers[i].Digest()
		if g != w {
			t.Errorf("layer %d: %s, want %s", i, g, w)
		}
	}
}

func TestWriteLayoutAndTarball(t *testing.T) {
	tag := name.MustParseReference("quay.io/dcm-project/k8s-container-service-provider:v9.9.9").(name.Tag)
	var tars [][]byte
	for range 2 {
		idx, imgs := fakeIndex(t, "v9.9.9")
		dir := t.TempDir()
		lay, tarPath := filepath.Join(dir, "oci"), filepath.Join(dir, "image.tar")
		// A blob from an earlier build must not survive into this one.
		if err := os.MkdirAll(filepath.Join(lay, "blobs", "sha256"), 0o755); err != nil {
			t.Fatal(err)
		}
		stale := filepath.Join(lay, "blobs", "sha256", "stale")
		if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeLayout(lay, idx, tag); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(stale); !os.IsNotExist(err) {
			t.Errorf("the stale blob is still there: %v", err)
		}
		mj, err := dockerManifest(imgs[0], tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeTarball(lay, tarPath, mj); err != nil {
			t.Fatal(err)
		}
		checkOutputs(t, lay, tarPath, tag, idx, imgs[0], true)
		b, err := os.ReadFile(tarPath)
		if err != nil {
			t.Fatal(err)
		}
		tars = append(tars, b)
	}
	if !bytes.Equal(tars[0], tars[1]) {
		t.Error("two writes of the same index gave different tarballs")
	}
}
