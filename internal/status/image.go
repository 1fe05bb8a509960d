package status

import (
	"context"
	"sync"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// resolveTimeout bounds one resolution; the looks at an image that did not resolve are
// spaced from imageRetryMin, doubling, up to imageRetryMax (Controller.imageBackoff).
// resolveSlots bounds the resolutions that run at once.
const (
	resolveTimeout = 30 * time.Second
	imageRetryMin  = 5 * time.Second
	imageRetryMax  = 5 * time.Minute
	resolveSlots   = 4
)

// imageStep resolves the image p holds, if any, and returns p.RecheckAfter moved up to
// the next try.
func (r *Controller) imageStep(ctx context.Context, id string, p Plan) time.Duration {
	if r.resolving == nil {
		return p.RecheckAfter
	}
	if p.ResolveImage == nil {
		r.resolving.forget(id)
		r.imageBackoff.Forget(id)
		return p.RecheckAfter
	}
	if wait := r.resolveImage(ctx, id, p.ResolveImage); wait > 0 && (p.RecheckAfter == 0 || wait < p.RecheckAfter) {
		return wait
	}
	return p.RecheckAfter
}

// resolveImage pins or refuses the image of a Deployment a create held, once its
// resolution has ended. It returns when to look again (0: when the resolution ends, or
// on the next change).
func (r *Controller) resolveImage(ctx context.Context, id string, dep *container.Deployment) time.Duration {
	out, wait, ended := r.resolving.take(ctx, id, dep.Container.Image, r.opts.Clock.Now(), r.requeue)
	if !ended {
		return wait
	}
	if refusal, ok := image.Refused(out.err); ok {
		r.imageBackoff.Forget(id)
		if err := r.cl.RefuseImage(ctx, dep, dep.Container.Image+": "+refusal.Error()); err != nil {
			r.log.Info("status: could not mark the image refused", "id", id, "error", err)
			return imageRetryMin
		}
		return 0
	}
	if out.err != nil {
		wait := r.imageBackoff.When(id)
		r.resolving.notBefore(id, r.opts.Clock.Now().Add(wait))
		r.log.Info("status: image not resolved yet", "id", id, "reference", dep.Container.Image, "error", out.err, "retry", wait.String())
		return wait
	}
	r.imageBackoff.Forget(id)
	if err := r.cl.PinImage(ctx, dep, out.res.Pinned); err != nil {
		r.log.Info("status: could not pin the image", "id", id, "error", err)
		return imageRetryMin
	}
	r.log.Info("status: image resolved", "id", id, "pinned", out.res.Pinned)
	return 0
}

// requeue looks at id again now (a resolution ended).
func (r *Controller) requeue(id string) {
	r.mu.Lock()
	queue := r.queue
	r.mu.Unlock()
	if queue != nil {
		queue.Add(id)
	}
}

// resolutions run apart from the workers, at most resolveSlots at a time, so a registry
// that hangs holds back only the containers that wait for it.
type resolutions struct {
	images Images
	slots  chan struct{}
	mu     sync.Mutex
	of     map[string]*resolution
}

// resolution is one container's: running, ended (until taken), or waiting to start.
type resolution struct {
	reference string
	running   bool
	ended     bool
	dropped   bool // forgotten while running: gone when it ends
	res       image.Resolved
	err       error
	after     time.Time
}

func newResolutions(images Images) *resolutions {
	return &resolutions{images: images, slots: make(chan struct{}, resolveSlots), of: map[string]*resolution{}}
}

// take returns id's ended resolution of ref. Otherwise it starts one, unless one runs or
// the backoff says later, and returns how long until it starts (0: ready(id) is called
// when it ends).
func (rs *resolutions) take(ctx context.Context, id, ref string, now time.Time, ready func(string)) (out resolution, wait time.Duration, ended bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	x := rs.of[id]
	if x != nil && x.reference != ref && !x.running {
		x = nil // another incarnation's image
	}
	switch {
	case x != nil && x.ended:
		out = *x
		rs.of[id] = &resolution{reference: ref, after: x.after}
		return out, 0, true
	case x != nil && x.running:
		x.dropped = false
		return resolution{}, 0, false
	case x != nil && now.Before(x.after):
		return resolution{}, x.after.Sub(now), false
	}
	x = &resolution{reference: ref, running: true}
	rs.of[id] = x
	go func() {
		res, err := rs.resolve(ctx, ref)
		rs.mu.Lock()
		x.running, x.ended, x.res, x.err = false, true, res, err
		if x.dropped && rs.of[id] == x {
			delete(rs.of, id)
		}
		rs.mu.Unlock()
		ready(id)
	}()
	return resolution{}, 0, false
}

// resolve waits for a slot, then resolves ref within resolveTimeout.
func (rs *resolutions) resolve(ctx context.Context, ref string) (image.Resolved, error) {
	select {
	case rs.slots <- struct{}{}:
	case <-ctx.Done():
		return image.Resolved{}, ctx.Err()
	}
	defer func() { <-rs.slots }()
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	return rs.images.Resolve(ctx, ref)
}

// notBefore holds id's next resolution until at.
func (rs *resolutions) notBefore(id string, at time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if x := rs.of[id]; x != nil {
		x.after = at
	}
}

// forget drops id's resolution (a running one once it ends).
func (rs *resolutions) forget(id string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch x := rs.of[id]; {
	case x == nil:
	case x.running:
		x.dropped = true
	default:
		delete(rs.of, id)
	}
}
