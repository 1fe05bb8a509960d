package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refAnnotations name the index in the layout's index.json: the OCI ref.name (podman
// load takes a full reference there as the image's name) and containerd's image name
// (ctr import and Docker's containerd image store read it).
func refAnnotations(tag name.Tag) map[string]string {
	return map[string]string{
		"org.opencontainers.image.ref.name": tag.String(),
		"io.containerd.image.name":          tag.String(),
	}
}

// writeLayout writes idx as an OCI image layout in dir (replaced whole: a stale blob of
// an earlier build must not end up in the tarball), its index.json holding one
// descriptor, the index, named by tag.
func writeLayout(dir string, idx v1.ImageIndex, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(refAnnotations(tag))); err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	return nil
}

// dockerManifest is the docker-archive manifest.json describing img by the layout's blob
// paths, as docker save writes it since Docker 25: Docker's classic image store loads
// the tarball through it (the containerd store and podman read index.json).
func dockerManifest(img v1.Image, tag name.Tag) ([]byte, error) {
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	cfg, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	d := tarball.Descriptor{Config: blob(cfg), RepoTags: []string{tag.String()}}
	for _, l := range m.Layers {
		d.Layers = append(d.Layers, blob(l.Digest))
	}
	return json.Marshal(tarball.Manifest{d})
}

// writeTarball writes the layout folder as a tar at tarPath, with manifest.json added,
// entries sorted, folders 0755, files 0644, owner 0:0, all at the epoch: the same layout
// gives the same bytes.
func writeTarball(layoutDir, tarPath string, manifestJSON []byte) (err error) {
	var names []string
	err = filepath.WalkDir(layoutDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == layoutDir {
			return err
		}
		rel, err := filepath.Rel(layoutDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	if slices.Contains(names, "manifest.json") {
		return fmt.Errorf("%s already has a manifest.json", layoutDir)
	}
	names = append(names, "manifest.json")
	slices.Sort(names)

	f, err := os.Create(tarPath)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(tarPath) // no half-written tarball
		}
	}()
	tw := tar.NewWriter(f)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: epoch, Format: tar.FormatUSTAR}
		if n[len(n)-1] == '/' {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		data := manifestJSON
		if n != "manifest.json" {
			// Blobs are read whole: the largest is one compressed binary layer.
			if data, err = os.ReadFile(filepath.Join(layoutDir, n)); err != nil {
				return err
			}
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return tw.Close()
}
