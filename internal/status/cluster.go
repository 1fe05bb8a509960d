package status

import (
	"context"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Cluster is how the reporter reads and changes the container records at the apiserver
// (internal/store implements it).
type Cluster interface {
	// DeleteRecord deletes the record of a container that is gone or was never made
	// (this UID only), and its Services (each by UID); its finalizer keeps it until the
	// DELETED is delivered, and the garbage collector deletes anything else it owned.
	DeleteRecord(ctx context.Context, rec container.Record, services []*container.Service) error
	// DeleteOrphans deletes Deployments and Services no live record owns, each by UID;
	// one gone already is deleted.
	DeleteOrphans(ctx context.Context, deps []*container.Deployment, svcs []*container.Service) error
	// Finalize takes the finalizer off a deleted record whose DELETED has been
	// delivered (this UID only), so the apiserver lets it go.
	Finalize(ctx context.Context, rec container.Record) error
	// Confirmed is container id as the apiserver has it, not the caches: its record
	// and, when the record lives, its Deployments (no pods: see Plan.NeedsConfirmation).
	// A plan that takes a destructive step is made again from it, and carried out only
	// if both agree.
	Confirmed(ctx context.Context, id string) (container.Snapshot, error)
}
