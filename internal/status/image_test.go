package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// fakeImages fails its first fail resolutions, then refuses or resolves.
type fakeImages struct {
	mu     sync.Mutex
	fail   int
	refuse bool
}

const pinned = "quay.io/example/app@sha256:0000000000000000000000000000000000000000000000000000000000000001"

func (f *fakeImages) Resolve(context.Context, string) (image.Resolved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if failing(&f.fail) {
		return image.Resolved{}, errors.New("registry unreachable")
	}
	if f.refuse {
		return image.Resolved{}, &image.Refusal{Rule: image.RuleForeignURLs, Detail: "layer 0 names http://10.0.0.1/x"}
	}
	return image.Resolved{Pinned: pinned, Digest: "sha256:01"}, nil
}

func (j *journal) PinImage(_ context.Context, d *container.Deployment, p string) error {
	j.add("pin " + d.Name + " " + p)
	return nil
}

func (j *journal) RefuseImage(_ context.Context, d *container.Deployment, _ string) error {
	j.add("refuse " + d.Name)
	return nil
}

// held is a Deployment a create held at zero pods for its image.
func held(d *appsv1.Deployment) {
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "quay.io/example/app:v1"}}
	container.HoldImage(d, "quay.io/example/app:v1: registry unreachable", false)
}

func TestControllerResolvesAHeldImageWithBackoff(t *testing.T) {
	imgs := &fakeImages{fail: 2}
	r := startControllerWith(t, 0, 0, func(o *Options) { o.Images = imgs })
	r.src.set("a", container.Snapshot{Record: record(), Deployments: deps(dep("a-1", held))})
	// 5 s, then 10 s, on the controller's clock.
	r.out.await(t, func() { r.clock.Step(100 * time.Millisecond) }, []string{"publish a PENDING", "pin a-1 " + pinned})
}

func TestControllerMarksARefusedImage(t *testing.T) {
	r := startControllerWith(t, 0, 0, func(o *Options) { o.Images = &fakeImages{refuse: true} })
	r.src.set("a", container.Snapshot{Record: record(), Deployments: deps(dep("a-1", held))})
	r.out.waitFor(t, "publish a PENDING", "refuse a-1")
}

// hangingImages answers no resolution until released.
type hangingImages struct{ release chan struct{} }

func (h *hangingImages) Resolve(ctx context.Context, _ string) (image.Resolved, error) {
	select {
	case <-h.release:
		return image.Resolved{Pinned: pinned}, nil
	case <-ctx.Done():
		return image.Resolved{}, ctx.Err()
	}
}

// A registry that never answers holds no worker: with one worker, every container's
// status still goes out, the held ones' included, and the held images are pinned once
// the registry answers.
func TestControllerReportsWhileARegistryHangs(t *testing.T) {
	imgs := &hangingImages{release: make(chan struct{})}
	r := startControllerWith(t, 0, 0, func(o *Options) { o.Images = imgs })
	var published, pins []string
	for i := range 2 * resolveSlots {
		id := fmt.Sprintf("h%d", i)
		r.src.set(id, container.Snapshot{Record: record(), Deployments: deps(dep(id+"-1", held))})
		published = append(published, "publish "+id+" PENDING")
		pins = append(pins, "pin "+id+"-1 "+pinned)
	}
	r.src.set("b", container.Snapshot{Record: record(), Deployments: deps(dep("b-1"))})
	published = append(published, "publish b PENDING")
	r.out.awaitAll(t, published...)
	close(imgs.release)
	r.out.awaitAll(t, pins...)
}
