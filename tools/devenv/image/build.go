package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Output names inside Options.OutDir.
const (
	LayoutDirName = "oci"
	TarballName   = "k8s-container-sp.tar"
)

// Result is what a build made.
type Result struct {
	Ref         string
	Index       v1.ImageIndex
	IndexDigest v1.Hash
	Platforms   []PlatformResult
	CARoots     int    // certificates in ca-certificates.crt
	LayoutDir   string // the OCI layout folder
	Tarball     string // the layout as a tar, with a docker manifest.json
	TarballSize int64
	GoBuild     time.Duration // spent in go build, all platforms
	Took        time.Duration // the whole build
}

// PlatformResult is one platform's image.
type PlatformResult struct {
	Platform   string // os/arch[/variant]
	Digest     v1.Hash
	Compressed int64 // what a pull downloads: manifest, config and gzipped layers
	BinarySize int64 // the uncompressed binary
}

// Build builds the binary for every platform, assembles the index and writes the OCI
// layout and the tarball into o.OutDir. The error, if any, is one line.
func Build(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	labels := Labels(r.Version, r.Revision)
	ca, roots := caBundle()
	base, err := layerOf(baseEntries(ca))
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	tmp, err := os.MkdirTemp("", "sp-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	res := &Result{Ref: r.tag.String(), CARoots: roots}
	var imgs []v1.Image
	for _, p := range r.platforms {
		t := time.Now()
		bin, err := goBuild(ctx, r, p, tmp)
		res.GoBuild += time.Since(t)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		layer, err := layerOf(binaryEntries(b))
		if err != nil {
			return nil, fmt.Errorf("binary layer for %s: %w", p, err)
		}
		img, err := platformImage(p, base, layer, labels)
		if err != nil {
			return nil, err
		}
		pr, err := describe(p, img)
		if err != nil {
			return nil, err
		}
		pr.BinarySize = int64(len(b))
		res.Platforms = append(res.Platforms, pr)
		imgs = append(imgs, img)
	}
	res.Index = index(r.platforms, imgs, labels)
	if res.IndexDigest, err = res.Index.Digest(); err != nil {
		return nil, err
	}

	if err := os.MkdirAll(r.OutDir, 0o755); err != nil {
		return nil, err
	}
	res.LayoutDir = filepath.Join(r.OutDir, LayoutDirName)
	res.Tarball = filepath.Join(r.OutDir, TarballName)
	if err := writeLayout(res.LayoutDir, res.Index, r.tag); err != nil {
		return nil, err
	}
	mj, err := dockerManifest(imgs[0], r.tag)
	if err != nil {
		return nil, err
	}
	if err := writeTarball(res.LayoutDir, res.Tarball, mj); err != nil {
		return nil, fmt.Errorf("writing %s: %w", res.Tarball, err)
	}
	fi, err := os.Stat(res.Tarball)
	if err != nil {
		return nil, err
	}
	res.TarballSize = fi.Size()
	res.Took = time.Since(start)
	return res, nil
}

// describe is img's digest and the bytes a pull of it downloads.
func describe(p platform, img v1.Image) (PlatformResult, error) {
	pr := PlatformResult{Platform: p.String()}
	if p.v1.Variant != "" {
		pr.Platform += "/" + p.v1.Variant
	}
	var err error
	if pr.Digest, err = img.Digest(); err != nil {
		return pr, err
	}
	m, err := img.Manifest()
	if err != nil {
		return pr, err
	}
	size, err := img.Size()
	if err != nil {
		return pr, err
	}
	pr.Compressed = size + m.Config.Size
	for _, l := range m.Layers {
		pr.Compressed += l.Size
	}
	return pr, nil
}

// Print writes the summary make image shows.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "image:  %s\n", r.Ref)
	fmt.Fprintf(w, "digest: %s (the index; %s@%s)\n", r.IndexDigest, r.Ref, r.IndexDigest)
	for _, p := range r.Platforms {
		fmt.Fprintf(w, "  %-16s %s  %s compressed (binary %s)\n", p.Platform, p.Digest, mib(p.Compressed), mib(p.BinarySize))
	}
	fmt.Fprintf(w, "layout:  %s (OCI image layout, index.json names %s)\n", r.LayoutDir, r.Ref)
	fmt.Fprintf(w, "tarball: %s (%s; docker load -i / podman load -i)\n", r.Tarball, mib(r.TarballSize))
	fmt.Fprintf(w, "CA roots: %d; built in %s (go build %s)\n", r.CARoots, r.Took.Round(100*time.Millisecond), r.GoBuild.Round(100*time.Millisecond))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
