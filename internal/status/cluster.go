package status

import (
	"context"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Cluster is how the reporter changes the cluster (internal/store implements it): the
// container records and Services a gone container left.
type Cluster interface {
	EnsureRecord(ctx context.Context, id, incarnation string, owed bool) error
	DeleteService(ctx context.Context, svc *container.Service) error
	// DeleteRecord deletes a record whose DELETED has been delivered (this UID only).
	DeleteRecord(ctx context.Context, rec container.Record) error
	// Confirmed is container id as the apiserver has it, not the caches: its record,
	// Deployments and Services (no pods: see Plan.NeedsConfirmation). A plan that takes
	// a destructive step is made again from it, and carried out only if both agree.
	Confirmed(ctx context.Context, id string) (container.Snapshot, error)
}

// applyBefore carries out the cluster steps that come before a plan's Publish.
func applyBefore(ctx context.Context, c Cluster, id string, p Plan) error {
	if w := p.Record; w != nil {
		if err := c.EnsureRecord(ctx, id, w.Incarnation, w.Owed); err != nil {
			return err
		}
	}
	for _, s := range p.DeleteServices {
		if err := c.DeleteService(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
