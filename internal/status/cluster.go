package status

import (
	"context"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// Cluster reads and changes container records at the apiserver (internal/store implements it).
type Cluster interface {
	// DeleteRecord deletes, by UID, the record of a container gone or never made, and its
	// Services; its finalizer holds it until DELETED is delivered; the garbage collector takes the rest.
	DeleteRecord(ctx context.Context, rec container.Record, services []*container.Service) error
	// DeleteOrphans deletes, by UID, Deployments and Services no live record owns; gone counts as done.
	DeleteOrphans(ctx context.Context, deps []*container.Deployment, svcs []*container.Service) error
	// Finalize removes the finalizer (by UID) from a deleted record whose DELETED was delivered.
	Finalize(ctx context.Context, rec container.Record) error
	// Confirmed is container id as the apiserver has it: its record and, if live, its
	// Deployments (no pods: see Plan.NeedsConfirmation). Destructive plans must agree with it.
	Confirmed(ctx context.Context, id string) (container.Snapshot, error)
	// PinImage lets a Deployment held for its image run the digest pinned (by UID).
	PinImage(ctx context.Context, dep *container.Deployment, pinned string) error
	// RefuseImage keeps a held Deployment at zero pods for good, saying why (by UID).
	RefuseImage(ctx context.Context, dep *container.Deployment, reason string) error
}

// Images resolves image references (internal/image).
type Images interface {
	Resolve(ctx context.Context, ref string) (image.Resolved, error)
}
