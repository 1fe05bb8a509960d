package localstack

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

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
	var err error
	if s.images, err = imageregistry.StartLocal(filepath.Join(s.Dir, "images"), nil); err != nil {
		return "", err
	}
	if _, err := s.images.PushRandom(ctx, exampleImage); err != nil {
		return "", fmt.Errorf("pushing the example image: %w", err)
	}
	s.ImageRegistry = s.images.Addr
	fmt.Fprintf(progress, "local: image registry on %s holding %s; the service resolves every image there\n", s.images.Addr, exampleImage)
	return "http://" + s.images.Addr, nil
}
