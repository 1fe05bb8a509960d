package image

import (
	"archive/tar"
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// repoRoot is the service's checkout: this package is tools/devenv/image in it.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "k8s-container-sp", "main.go")); err != nil {
		t.Fatalf("not the service's checkout: %v", err)
	}
	return root
}

// The real build, twice, by the sp-image command (built without -race: under the race
// detector gzip and hashing of the binaries take minutes): one index digest, printed, and
// the same tarball bytes; the image is what the service needs (user, entrypoint, labels,
// files with fixed modes at the epoch), the outputs read back with ggcr's readers, and
// the binary taken out of the host platform's image prints the version and revision.
func TestBuildIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the image twice for both platforms (minutes); make test runs it")
	}
	const version, revision = "v0.0.0-imagetest", "0123456789abcdef0123456789abcdef01234567"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root := repoRoot(t)
	spImage := filepath.Join(t.TempDir(), "sp-image")
	build := exec.CommandContext(ctx, "go", "build", "-o", spImage, "./cmd/sp-image")
	build.Dir = filepath.Join(root, "tools", "devenv")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build sp-image: %v\n%s", err, out)
	}
	var outDirs, printed []string
	for range 2 {
		dir := t.TempDir()
		cmd := exec.CommandContext(ctx, spImage, "-version", version, "-revision", revision, "-out", dir)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sp-image: %v\n%s", err, &stderr)
		}
		t.Logf("sp-image:\n%s", out)
		outDirs, printed = append(outDirs, dir), append(printed, string(out))
	}
	digestLine := regexp.MustCompile(`(?m)^digest: (sha256:[0-9a-f]{64}) `)
	var digests []string
	for _, p := range printed {
		m := digestLine.FindStringSubmatch(p)
		if m == nil {
			t.Fatalf("no digest printed:\n%s", p)
		}
		digests = append(digests, m[1])
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds gave two index digests: %s and %s", digests[0], digests[1])
	}
	tarPath := filepath.Join(outDirs[0], TarballName)
	ta, _ := os.ReadFile(tarPath)
	tb, _ := os.ReadFile(filepath.Join(outDirs[1], TarballName))
	if len(ta) == 0 || !bytes.Equal(ta, tb) {
		t.Errorf("two builds gave different tarballs (%d and %d bytes)", len(ta), len(tb))
	}

	tag := name.MustParseReference("quay.io/dcm-project/k8s-container-service-provider:" + version).(name.Tag)
	layoutDir := filepath.Join(outDirs[0], LayoutDirName)
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := top.ImageIndex(v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(digests[0], "sha256:")})
	if err != nil {
		t.Fatalf("the printed digest is not in the layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	labels := Labels(version, revision)
	if !maps.Equal(im.Annotations, labels) {
		t.Errorf("index annotations %v, want %v", im.Annotations, labels)
	}
	wantPlatforms := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}
	if len(im.Manifests) != len(wantPlatforms) {
		t.Fatalf("%d manifests, want %d", len(im.Manifests), len(wantPlatforms))
	}
	var imgs []v1.Image
	var baseDigests []v1.Hash
	var hostBinary []byte
	for i, d := range im.Manifests {
		p := wantPlatforms[i]
		if d.Platform == nil || !d.Platform.Equals(p) || !strings.Contains(printed[0], d.Digest.String()) {
			t.Errorf("manifest %d: %+v, want platform %+v and its digest printed", i, d, p)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
		checkConfig(t, img, p, labels)
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			t.Fatalf("%s: %d layers, %v; want 2", p, len(layers), err)
		}
		bd, _ := layers[0].Digest()
		baseDigests = append(baseDigests, bd)
		checkLayer(t, layers[0], []header{
			{"etc/", tar.TypeDir, 0o755, -1}, {"etc/group", tar.TypeReg, 0o644, -1}, {"etc/passwd", tar.TypeReg, 0o644, -1},
			{"etc/ssl/", tar.TypeDir, 0o755, -1}, {"etc/ssl/certs/", tar.TypeDir, 0o755, -1},
			{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, -1}, {"tmp/", tar.TypeDir, 0o1777, -1},
		})
		bin := checkLayer(t, layers[1], []header{{"k8s-container-sp", tar.TypeReg, 0o755, -1}})
		if runtime.GOOS == p.OS && runtime.GOARCH == p.Architecture {
			hostBinary = bin
		}
	}
	if baseDigests[0] != baseDigests[1] {
		t.Errorf("the base layer differs between platforms: %v", baseDigests)
	}
	checkOutputs(t, layoutDir, tarPath, tag, idx, imgs[0], false)

	// The host's binary, as the image holds it, runs and tells what it is.
	if hostBinary == nil {
		t.Skipf("no image for this machine (%s/%s) to run", runtime.GOOS, runtime.GOARCH)
	}
	bin := filepath.Join(t.TempDir(), "k8s-container-sp")
	if err := os.WriteFile(bin, hostBinary, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--version")
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	want := "k8s-container-sp " + version + "\nrevision " + revision + ", go"
	if err != nil || !strings.HasPrefix(string(out), want) || !strings.HasSuffix(string(out), " linux/"+runtime.GOARCH+"\n") {
		t.Errorf("--version: %v\n%s\nwant it to start %q", err, out, want)
	}
}

// checkConfig is the config the service's deployment relies on.
func checkConfig(t *testing.T, img v1.Image, p v1.Platform, labels map[string]string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != p.OS || cf.Architecture != p.Architecture || cf.Variant != p.Variant {
		t.Errorf("%s: config platform %s/%s/%s", p, cf.OS, cf.Architecture, cf.Variant)
	}
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/k8s-container-sp"}) || len(c.Cmd) != 0 {
		t.Errorf("%s: user %q entrypoint %q cmd %q", p, c.User, c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("%s: exposed ports %v", p, c.ExposedPorts)
	}
	if len(c.Env) != 1 || !strings.HasPrefix(c.Env[0], "PATH=") {
		t.Errorf("%s: env %q, want PATH only", p, c.Env)
	}
	if !maps.Equal(c.Labels, labels) {
		t.Errorf("%s: labels %v, want %v", p, c.Labels, labels)
	}
	if cf.Created.Unix() != 0 || len(cf.History) != 2 {
		t.Errorf("%s: created %v, %d history entries", p, cf.Created, len(cf.History))
	}
	for _, h := range cf.History {
		if h.Created.Unix() != 0 {
			t.Errorf("%s: history %q created %v", p, h.CreatedBy, h.Created)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(m.Annotations, labels) || m.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("%s: manifest %s annotations %v", p, m.MediaType, m.Annotations)
	}
}

// checkLayer compares l's entries (a size of -1 is not checked; readTar checks times and
// owners) and returns the content of its last file (the binary, for the binary layer).
func checkLayer(t *testing.T, l v1.Layer, want []header) []byte {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var last []byte
	got := readTar(t, rc, func(b []byte) { last = b })
	if len(got) != len(want) {
		t.Fatalf("layer entries %v, want %v", got, want)
	}
	for i := range got {
		w := want[i]
		if w.size < 0 {
			w.size = got[i].size
		}
		if got[i] != w {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], w)
		}
	}
	return last
}

// A build that cannot be made says why in one line and writes nothing.
func TestBuildErrors(t *testing.T) {
	broken := t.TempDir()
	for f, s := range map[string]string{
		"go.mod":  "module broken\n\ngo 1.26\n",
		"main.go": "package main\n\nfunc main() { notDefined() }\n",
	} {
		if err := os.WriteFile(filepath.Join(broken, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok := Options{Root: repoRoot(t), Version: "v1", Revision: "abc"}
	cases := []struct {
		name    string
		opts    func(o *Options)
		wantErr []string
	}{
		{name: "unknown platform", opts: func(o *Options) { o.Platforms = []string{"linux/amd64", "linux/ppc64le"} },
			wantErr: []string{`unknown platform "linux/ppc64le" (supported: linux/amd64, linux/arm64)`}},
		{name: "go build fails", opts: func(o *Options) { o.Root, o.Package, o.Platforms = broken, ".", []string{"linux/arm64"} },
			wantErr: []string{"go build . for linux/arm64 in " + broken + " failed (exit status 1): ", "undefined: notDefined"}},
		{name: "no such package", opts: func(o *Options) { o.Package = "./cmd/nothing-here" },
			wantErr: []string{"go build ./cmd/nothing-here for linux/amd64", "failed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			o.OutDir = filepath.Join(t.TempDir(), "out")
			tc.opts(&o)
			_, err := Build(context.Background(), o)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
			if _, serr := os.Stat(o.OutDir); !os.IsNotExist(serr) {
				t.Errorf("%s was written: %v", o.OutDir, serr)
			}
		})
	}
}
