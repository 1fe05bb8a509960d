package image

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push sends idx (every platform's image, then the index) to the registry of ref, with
// the credentials docker login / podman login saved (none for a local registry). A
// loopback or localhost registry is spoken to over plain HTTP, as ggcr does. Blobs the
// registry has are not sent again; the index is written last, so a failed push leaves
// no tag pointing at a partial image.
func Push(ctx context.Context, idx v1.ImageIndex, ref string) error {
	tag, err := parseTag(ref)
	if err != nil {
		return err
	}
	err = remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return fmt.Errorf("pushing %s: %s", tag, strings.Join(strings.Fields(err.Error()), " "))
	}
	return nil
}
