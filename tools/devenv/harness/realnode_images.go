package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The real node has no registry and no network: its images are made here, from one static
// Go binary (./testimage) that plays a workload chosen by its first argument, and imported
// into the node's containerd. Tags are not :latest, so a pod without imagePullPolicy gets
// IfNotPresent and never tries to pull them.
const (
	testImageRegistry = "example.invalid" // .invalid never resolves: a pull cannot leave the machine
	testImageTag      = "v1"
	// SandboxImage is containerd's sandbox_image: the testimage "pause" role, imported
	// before the kubelet starts, so a pod sandbox never needs a pull.
	SandboxImage = "registry.k8s.io/pause:3.10"
	// MissingImage is an image that is never imported: pods using it stay Pending with
	// ErrImagePull / ImagePullBackOff, and the failed pull goes to 127.0.0.1:1, nowhere else.
	MissingImage = "127.0.0.1:1/missing:v1"
	testImageBin = "/testimage"
	// testImageSrc is the test image's package, built in the tooling module (GOWORK=off:
	// tools/devenv/go.mod alone is enough).
	testImageSrc   = "./harness/testimage"
	testImagesFile = "test-images.tar"
)

// TestImageRoles are the workloads of the test images (see testimage/main.go):
// pause (wait for SIGTERM), web (HTTP :8080, /healthz), web80 (HTTP :80, needs
// NET_BIND_SERVICE), crash (exit 1), exit0 (exit 0), oom (allocate until the memory limit
// kills it), setuid (chown + setuid as root, then wait).
var TestImageRoles = []string{"pause", "web", "web80", "crash", "exit0", "oom", "setuid"}

// TestImage is the name of the real node's image playing role, e.g.
// TestImage("web") == "example.invalid/web:v1". It runs as root (the image sets no user),
// so a pod with runAsNonRoot and no runAsUser is refused (CreateContainerConfigError).
func TestImage(role string) string {
	return testImageRegistry + "/" + role + ":" + testImageTag
}

// TestImageNonRoot is TestImage with the image's user set to 65532:65532, e.g.
// "example.invalid/web:v1-nonroot": it runs under runAsNonRoot (a restricted pod
// security profile). The root-only roles (setuid, web80) then fail as they would for
// any non-root process.
func TestImageNonRoot(role string) string {
	return TestImage(role) + "-nonroot"
}

const nonRootUser = "65532:65532"

// buildTestImages compiles testimage (CGO_ENABLED=0, so it needs nothing from the image)
// and writes every role's image into one docker-archive tarball in dir.
func buildTestImages(ctx context.Context, dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("building the test images: %w", err)
	}
	bin := filepath.Join(dir, "testimage")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, testImageSrc)
	cmd.Dir = filepath.Join(root, "tools", "devenv")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOTOOLCHAIN=local", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the test image binary: %w\n%s", err, out)
	}
	tarPath := filepath.Join(dir, testImagesFile)
	if err := writeTestImages(bin, tarPath); err != nil {
		return "", fmt.Errorf("writing the test images: %w", err)
	}
	return tarPath, nil
}

// writeTestImages packs bin into two single-layer images per role, running as root and
// as 65532 (plus the sandbox image), and writes them all into one tarball that `ctr images import` reads. The layer is the
// same for every image, so the tarball holds it once.
func writeTestImages(bin, tarPath string) error {
	layer, err := binaryLayer(bin)
	if err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	add := func(ref, role, user string) error {
		img, err := mutate.AppendLayers(empty.Image, layer)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", runtime.GOARCH
		cf.Config.Entrypoint = []string{testImageBin, role}
		cf.Config.Env = []string{"PATH=/"}
		cf.Config.User = user
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		refs[tag] = img
		return nil
	}
	if err := add(SandboxImage, "pause", ""); err != nil {
		return err
	}
	for _, role := range TestImageRoles {
		if err := add(TestImage(role), role, ""); err != nil {
			return err
		}
		if err := add(TestImageNonRoot(role), role, nonRootUser); err != nil {
			return err
		}
	}
	f, err := os.Create(tarPath)
	if err != nil {
		return err
	}
	if err := tarball.MultiRefWrite(refs, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// binaryLayer is a layer holding bin as /testimage and a world-writable /tmp (the setuid
// role writes there).
func binaryLayer(bin string) (v1.Layer, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: mt}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(testImageBin, "/"), Typeflag: tar.TypeReg,
		Mode: 0o755, Size: int64(len(b)), ModTime: mt}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
}

// ImportImage loads an image tarball (`docker save` / `podman save` output, docker-archive
// or OCI layout) into the node's containerd, where the kubelet finds it. Pods must not
// pull it: use a non-latest tag (IfNotPresent is then the default) or set
// imagePullPolicy: IfNotPresent / Never.
func (n *RealNode) ImportImage(ctx context.Context, tarPath string) error {
	if _, err := os.Stat(tarPath); err != nil {
		return err
	}
	out, err := n.ctr(ctx, "images", "import", tarPath)
	if err != nil {
		return fmt.Errorf("importing %s: %w\n%s", tarPath, err, out)
	}
	return nil
}

// Images lists the image names the node's containerd holds.
func (n *RealNode) Images(ctx context.Context) ([]string, error) {
	out, err := n.ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return nil, fmt.Errorf("listing images: %w\n%s", err, out)
	}
	var names []string
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "sha256:") {
			names = append(names, l)
		}
	}
	return names, nil
}
