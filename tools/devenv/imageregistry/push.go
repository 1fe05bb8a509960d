package imageregistry

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Push puts the image in src (an OCI layout folder, a tarball of one as `make image`,
// `docker save` or `podman save` write, or a docker-archive tarball) into the registry at
// self under the name ref that pods will use (see LocalName), and returns where it went.
// The manifest goes last, so a push that fails leaves no name behind.
func Push(ctx context.Context, src, ref, self string) (name.Reference, error) {
	local, err := LocalName(ref, self)
	if err != nil {
		return nil, err
	}
	img, idx, cleanup, err := load(src, ref)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	opts := []remote.Option{remote.WithContext(ctx)}
	if idx != nil {
		err = remote.WriteIndex(local, idx, opts...)
	} else {
		err = remote.Write(local, img, opts...)
	}
	if err != nil {
		return nil, pushError(self, err)
	}
	return local, nil
}

// PushAll puts images (by the names pods use) into the registry at self in one go, each
// shared layer once.
func PushAll(ctx context.Context, images map[string]v1.Image, self string) error {
	refs := map[name.Reference]remote.Taggable{}
	for ref, img := range images {
		local, err := LocalName(ref, self)
		if err != nil {
			return err
		}
		refs[local] = img
	}
	if err := remote.MultiWrite(refs, remote.WithContext(ctx)); err != nil {
		return pushError(self, err)
	}
	return nil
}

func pushError(self string, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("the image registry %s is not answering (is the real node running? make cluster-up REAL_NODE=1): %w", self, err)
	}
	return fmt.Errorf("pushing to the image registry %s: %w", self, err)
}

// load reads src as an image index (an OCI layout with one index or image in it) or an
// image (a docker-archive tarball, picking the one tagged ref when it holds several).
func load(src, ref string) (v1.Image, v1.ImageIndex, func(), error) {
	nothing := func() {}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, nil, nothing, err
	}
	if fi.IsDir() {
		img, idx, err := fromLayout(src)
		return img, idx, nothing, err
	}
	entries, err := tarEntries(src)
	if err != nil {
		return nil, nil, nothing, fmt.Errorf("%s is not an image: not a tar file (%v)", src, err)
	}
	switch {
	case entries["index.json"]:
		dir, err := os.MkdirTemp("", "sp-image-")
		if err != nil {
			return nil, nil, nothing, err
		}
		cleanup := func() { _ = os.RemoveAll(dir) }
		if err := untar(src, dir); err != nil {
			cleanup()
			return nil, nil, nothing, err
		}
		img, idx, err := fromLayout(dir)
		if err != nil {
			cleanup()
			return nil, nil, nothing, fmt.Errorf("%s: %w", src, err)
		}
		return img, idx, cleanup, nil
	case entries["manifest.json"]:
		img, err := fromDockerArchive(src, ref)
		return img, nil, nothing, err
	}
	return nil, nil, nothing, fmt.Errorf("%s is not an image: a tar file with neither index.json (OCI layout) nor manifest.json (docker save)", src)
}

func fromLayout(dir string) (v1.Image, v1.ImageIndex, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("not an OCI layout: %w", err)
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, nil, fmt.Errorf("the OCI layout holds %d images, want one", len(m.Manifests))
	}
	d := m.Manifests[0]
	if d.MediaType.IsIndex() {
		idx, err := root.ImageIndex(d.Digest)
		return nil, idx, err
	}
	img, err := root.Image(d.Digest)
	return img, nil, err
}

func fromDockerArchive(src, ref string) (v1.Image, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(src) })
	if err != nil {
		return nil, fmt.Errorf("%s is not an image: %w", src, err)
	}
	if len(m) == 1 {
		return tarball.ImageFromPath(src, nil)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("%s holds %d images and %q names none of them", src, len(m), ref)
	}
	img, err := tarball.ImageFromPath(src, &tag)
	if err != nil {
		return nil, fmt.Errorf("%s holds %d images; none is tagged %s", src, len(m), ref)
	}
	return img, nil
}

// tarEntries lists the top-level file names of a tar file.
func tarEntries(src string) (map[string]bool, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	names := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		names[path.Clean(h.Name)] = true
	}
}

// untar unpacks regular files and folders of src into dir, refusing paths outside it.
func untar(src, dir string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := path.Clean(h.Name)
		if p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
			return fmt.Errorf("%s: entry %q is outside the archive", src, h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			out, err := os.Create(dst)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
