package store

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// Confirmed reads container id from the apiserver, not the caches (status.Cluster): what
// every destructive step of the status reporter is decided on. The reporter makes its
// plan again from this and acts only if both plans agree (status.Plan.NeedsConfirmation):
// a replica's cache can be behind by as long as a broken watch takes to come back.
//
// The record first, by name. Only a live record makes its Deployment matter (a
// container is a live record and the Deployment it controls), so only then are the
// id's Deployments listed: a DELETED after a DELETE is confirmed with one read. No
// pods and no Services: they never decide whether anything is deleted or reported
// DELETED (the reporter keeps the cache's pods for the status message).
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
