package status

import (
	"context"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// resolveTimeout bounds one resolution; the looks at an image that did not resolve are
// spaced from imageRetryMin, doubling, up to imageRetryMax (Controller.imageBackoff).
const (
	resolveTimeout = 30 * time.Second
	imageRetryMin  = 5 * time.Second
	imageRetryMax  = 5 * time.Minute
)

// imageStep resolves the image p holds, if any, and returns p.RecheckAfter moved up to
// the next try.
func (r *Controller) imageStep(ctx context.Context, id string, p Plan) time.Duration {
	if r.opts.Images == nil {
		return p.RecheckAfter
	}
	if p.ResolveImage == nil {
		r.imageBackoff.Forget(id)
		return p.RecheckAfter
	}
	if wait := r.resolveImage(ctx, id, p.ResolveImage); wait > 0 && (p.RecheckAfter == 0 || wait < p.RecheckAfter) {
		return wait
	}
	return p.RecheckAfter
}

// resolveImage resolves the image of a Deployment a create held, and pins or refuses it.
// It returns when to try again (0: done, or the write failed and the next change retries).
func (r *Controller) resolveImage(ctx context.Context, id string, dep *container.Deployment) time.Duration {
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	res, err := r.opts.Images.Resolve(rctx, dep.Container.Image)
	cancel()
	if refusal, ok := image.Refused(err); ok {
		r.imageBackoff.Forget(id)
		if err := r.cl.RefuseImage(ctx, dep, dep.Container.Image+": "+refusal.Error()); err != nil {
			r.log.Info("status: could not mark the image refused", "id", id, "error", err)
			return imageRetryMin
		}
		return 0
	}
	if err != nil {
		wait := r.imageBackoff.When(id)
		r.log.Info("status: image not resolved yet", "id", id, "reference", dep.Container.Image, "error", err, "retry", wait.String())
		return wait
	}
	r.imageBackoff.Forget(id)
	if err := r.cl.PinImage(ctx, dep, res.Pinned); err != nil {
		r.log.Info("status: could not pin the image", "id", id, "error", err)
		return imageRetryMin
	}
	r.log.Info("status: image resolved", "id", id, "pinned", res.Pinned)
	return 0
}
