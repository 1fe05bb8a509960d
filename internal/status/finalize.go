package status

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
)

// Finalizers is how the reporter changes the cluster (internal/store implements it):
// the finalizer that holds a deleted container's Deployment until its DELETED has been
// delivered, and the container's id reservation.
type Finalizers interface {
	AddFinalizer(ctx context.Context, dep *appsv1.Deployment) error
	RemoveFinalizer(ctx context.Context, dep *appsv1.Deployment) error
	ReleaseReservation(ctx context.Context, dep *appsv1.Deployment) error
}

// applyClusterSteps carries out a plan's cluster steps (after its Publish succeeded):
// adopt, then unhold, then release. Each step is idempotent, so a retry after a partial
// failure repeats them safely.
func applyClusterSteps(ctx context.Context, w Finalizers, p Plan) error {
	if p.Adopt != nil {
		if err := w.AddFinalizer(ctx, p.Adopt); err != nil {
			return err
		}
	}
	for _, d := range p.Unhold {
		if err := w.RemoveFinalizer(ctx, d); err != nil {
			return err
		}
	}
	for _, d := range p.Release {
		if err := w.ReleaseReservation(ctx, d); err != nil {
			return err
		}
	}
	return nil
}
