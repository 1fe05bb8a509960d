package harness

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

// TagImage gives an image the node's registry holds (by the name pods use, e.g.
// TestImageNonRoot("web")) a second name (e.g. quay.io/example/web:v1), so a pod can pull
// a test image under a registry host the service allows by default.
func (n *RealNode) TagImage(ctx context.Context, src, dst string) error {
	from, err := imageregistry.LocalName(src, n.Registry)
	if err != nil {
		return err
	}
	to, err := imageregistry.LocalName(dst, n.Registry)
	if err != nil {
		return err
	}
	img, err := remote.Image(from, remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reading %s from the node's registry: %w", src, err)
	}
	if err := remote.Write(to, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("writing %s to the node's registry: %w", dst, err)
	}
	return nil
}
