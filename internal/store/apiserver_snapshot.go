package store

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// Confirmed reads container id from the apiserver, not the cache. The status controller
// takes a destructive step only if a plan from this agrees, since a cache is behind while
// a broken watch recovers (status.Plan.NeedsConfirmation). Deployments are listed only for
// a live record, so a DELETED after a DELETE costs one read. Pods and Services are not
// read: they never decide a deletion.
func (s *Store) Confirmed(ctx context.Context, id string) (container.Snapshot, error) {
	var snap container.Snapshot
	f, err := s.readRecord(ctx, id, false)
	switch {
	case f.Read == absent, f.Read == answered && !f.Ours:
		return snap, nil
	case err != nil:
		return snap, kubeerr.Classify("reading the container record", err)
	}
	rec := f.Rec
	snap.Record = &rec
	if rec.Terminating {
		return snap, nil
	}
	deps, err := s.client.AppsV1().Deployments(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: container.InstanceSelector(id)})
	if err != nil {
		return snap, kubeerr.Classify("listing Deployments", err)
	}
	snap.Deployments = container.DeploymentsOf(deps.Items)
	// Oldest first, as the cache's snapshot: Live() picks the oldest live one.
	slices.SortStableFunc(snap.Deployments, func(a, b *container.Deployment) int {
		return a.Created.Compare(b.Created)
	})
	return snap, nil
}
