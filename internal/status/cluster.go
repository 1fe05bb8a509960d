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
	// Gone asks the apiserver, not the caches, whether the container of this record is
	// gone: the record still exists as it is (same UID) and no Deployment of the id
	// lives, whatever its incarnation. A cache can be behind by the length of a broken watch (an
	// apiserver restart), and a DELETED sent from it could be for a container that was
	// re-created since, or one that lives.
	Gone(ctx context.Context, id string, rec container.Record) (bool, error)
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
