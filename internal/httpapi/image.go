package httpapi

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// Resolver resolves an image reference to a digest and checks it (internal/image).
type Resolver interface {
	Resolve(ctx context.Context, ref string) (image.Resolved, error)
}

// resolveImage pins dep's image to the digest it resolves to, or holds dep at zero pods
// when the registry cannot tell yet, so a create still answers 201 and stays PENDING.
// An image that breaks a rule is a 400.
func (h *handlers) resolveImage(ctx context.Context, dep *appsv1.Deployment, ref string) (digest string, p *Problem) {
	if h.images == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.imageTimeout)
	defer cancel()
	start := time.Now()
	r, err := h.images.Resolve(ctx, ref)
	if refusal, ok := image.Refused(err); ok {
		return "", invalid(container.Violation{Pointer: container.Pointer("spec", "image", "reference"),
			Detail: fmt.Sprintf("image.reference %q: %s", container.Clip(ref, container.MaxQuoted), refusal.Error())})
	}
	if err != nil {
		h.log.Info("image not resolved at create; the status controller retries", "reference", ref, "error", err, "after", time.Since(start).Round(time.Millisecond).String())
		container.HoldImage(dep, fmt.Sprintf("%s: %v", ref, err), false)
		return "", nil
	}
	container.PinImage(dep, r.Pinned)
	return r.Digest, nil
}
