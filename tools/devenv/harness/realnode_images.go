package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

// The real node's images are made here, from one static Go binary (./testimage) that
// plays a workload chosen by its first argument, and pushed to the node's own registry
// (package imageregistry) under their names. containerd pulls every name from that
// registry and from nowhere else (see hostsTOML), so an image that was never pushed
// fails to pull with an error naming the registry, and no pull leaves the machine.
const (
	testImageRegistry = "example.invalid" // .invalid never resolves, whatever happens
	testImageTag      = "v1"
	// SandboxImage is containerd's sandbox_image: the testimage "pause" role, pulled
	// from the node's registry like every other image.
	SandboxImage = "registry.k8s.io/pause:3.10"
	// MissingImage is an image that is never pushed: pods using it stay Pending with
	// ErrImagePull / ImagePullBackOff, refused by the node's registry (which the message
	// names), like any public name nobody pushed.
	MissingImage = "quay.io/example/never-pushed:v1"
	// ImageRegistries is SP_IMAGE_REGISTRIES for a service whose containers run the
	// test images: the service's default list, the real node's test images' registry
	// host and kwok's fate images' (fates.go).
	ImageRegistries = testImageRegistry + ",kwok.invalid,docker.io,quay.io,ghcr.io,registry.k8s.io,gcr.io"
	// ResolveOff is the setting of a test service that resolves no image: kwok nodes run
	// none, and no registry serves the names their tests use. Image tests turn it on
	// with ResolveThrough.
	ResolveOff   = "SP_IMAGE_RESOLVE=false"
	testImageBin = "/testimage"
	// The test image's and the registry's packages, built in the tooling module
	// (GOWORK=off: tools/devenv/go.mod alone is enough).
	testImageSrc     = "./harness/testimage"
	imageRegistrySrc = "./cmd/sp-image-registry"
)

// TestImageRoles are the workloads of the test images (see testimage/main.go):
// pause (wait for SIGTERM), web (HTTP :8080, /healthz), web80 (HTTP :80, needs
// NET_BIND_SERVICE), crash (exit 1), exit0 (exit 0), oom (allocate until the memory limit
// kills it), setuid (chown + setuid as root, then wait), incluster (the in-cluster
// config against the kubernetes Service, then dial the addresses in $DIAL, then wait),
// netraw (exit 42 if a raw socket opens, else wait), fill (write $FILL_MIB MiB, wait),
// dial (HTTP whose /dial?addr= tries a TCP connection from the pod; TCP relays).
var TestImageRoles = []string{"pause", "web", "web80", "crash", "exit0", "oom", "setuid", "incluster", "netraw", "fill", "dial"}

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

// buildNodeBinaries compiles testimage and the image registry (CGO_ENABLED=0, so the
// test image needs nothing from its image) into dir.
func buildNodeBinaries(ctx context.Context, dir string) (testimage, registry string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", fmt.Errorf("building the test images: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", dir+string(filepath.Separator),
		testImageSrc, imageRegistrySrc)
	cmd.Dir = filepath.Join(root, "tools", "devenv")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOTOOLCHAIN=local", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building the test image binary and the image registry: %w\n%s", err, out)
	}
	return filepath.Join(dir, "testimage"), filepath.Join(dir, "sp-image-registry"), nil
}

// testImages packs bin into two single-layer images per role, running as root and as
// 65532 (plus the sandbox image), by the names pods use. The layer is the same for
// every image, so the registry holds it once.
func testImages(bin string) (map[string]v1.Image, error) {
	layer, err := binaryLayer(bin)
	if err != nil {
		return nil, err
	}
	images := map[string]v1.Image{}
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
		images[ref] = img
		return nil
	}
	if err := add(SandboxImage, "pause", ""); err != nil {
		return nil, err
	}
	for _, role := range TestImageRoles {
		if err := add(TestImage(role), role, ""); err != nil {
			return nil, err
		}
		if err := add(TestImageNonRoot(role), role, nonRootUser); err != nil {
			return nil, err
		}
	}
	return images, nil
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

// PushImage puts the image in src (an OCI layout folder or tarball, `make image`'s
// output, or a `docker save` / `podman save` tarball) into the node's registry under
// ref, the name pods use (docker.io/library/nginx:alpine, or REGISTRY/team/app:v1), and
// returns where it went. Pods then pull it by that name, with any pull policy.
func (n *RealNode) PushImage(ctx context.Context, src, ref string) (string, error) {
	local, err := imageregistry.Push(ctx, src, ref, n.Registry)
	if err != nil {
		return "", err
	}
	return local.String(), nil
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

// startImageRegistry starts the node's registry by PID (detached like the node) and
// pushes the test images into it.
func (n *RealNode) startImageRegistry(ctx context.Context, bin string, images map[string]v1.Image) error {
	p, err := startProcess("image-registry", bin, []string{"-addr", n.Registry, "-dir", filepath.Join(n.Dir, "image-registry")},
		n.Dir, n.rec.Detached)
	if err != nil {
		return err
	}
	n.rec.ImageRegistry = p
	if err := n.save(); err != nil {
		return err
	}
	if err := waitFor("image registry", 30*time.Second, []*process{p}, func() error {
		return httpOK(http.DefaultClient, "http://"+n.Registry+"/v2/", "")
	}); err != nil {
		return err
	}
	start := time.Now()
	if err := imageregistry.PushAll(ctx, images, n.Registry); err != nil {
		return fmt.Errorf("pushing the test images: %w", err)
	}
	fmt.Fprintf(n.out, "harness: image registry on %s (the node pulls only from there); %d test images pushed in %s\n",
		n.Registry, len(images), time.Since(start).Round(time.Millisecond))
	return nil
}

// ResolveThrough are the settings of a service that resolves images as the real node
// pulls them: through its registry, for every registry host.
func (n *RealNode) ResolveThrough() []string {
	return []string{"SP_IMAGE_RESOLVE=true", "SP_IMAGE_MIRRORS=*=http://" + n.Registry}
}

// ImageRegistryLog is the node's registry's log: one line per request.
func (n *RealNode) ImageRegistryLog() string { return filepath.Join(n.Dir, "image-registry.log") }

// PushCommand is how a person pushes an image to the real node's registry.
const PushCommand = "bin/sp-harness push-image IMAGE.tar NAME   (NAME as pods will use it, e.g. docker.io/library/nginx:alpine; IMAGE.tar from make image, docker save or podman save, or an OCI layout folder)"
