package localstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

// exampleImage is the image the banner's example names (ExampleSpec).
const exampleImage = "quay.io/example/hello:v1"

// imageMirror is where the service resolves images (SP_IMAGE_MIRRORS=*=...), as the
// nodes would pull them: the real node's registry, or, with kwok, a registry on this
// machine holding the banner's example image (kwok pulls nothing, so any small image
// does). "" when the user chose SP_IMAGE_RESOLVE or SP_IMAGE_MIRRORS.
func (s *Stack) imageMirror(ctx context.Context, env map[string]string, progress io.Writer) (string, error) {
	if _, ok := env["SP_IMAGE_RESOLVE"]; ok {
		return "", nil
	}
	if _, ok := env["SP_IMAGE_MIRRORS"]; ok {
		return "", nil
	}
	if s.RealNode != nil {
		return "http://" + s.RealNode.Registry, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	self := ln.Addr().String()
	blobs := filepath.Join(s.Dir, "images")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		ln.Close()
		return "", err
	}
	s.images = &http.Server{Handler: imageregistry.New(self, blobs, io.Discard)}
	go func() { _ = s.images.Serve(ln) }()
	img, err := random.Image(1024, 1)
	if err != nil {
		return "", err
	}
	dst, err := imageregistry.LocalName(exampleImage, self)
	if err != nil {
		return "", err
	}
	if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing the example image: %w", err)
	}
	s.ImageRegistry = self
	fmt.Fprintf(progress, "local: image registry on %s holding %s; the service resolves every image there\n", self, exampleImage)
	return "http://" + self, nil
}
