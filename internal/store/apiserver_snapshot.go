package store

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Confirmed reads container id from the apiserver, not the caches (status.Cluster): its
// record, its Deployments and its Services, the objects every destructive step of the
// status reporter is decided on. The reporter makes its plan again from this and acts
// only if both plans agree (status.Plan.NeedsConfirmation): each cache lags on its own
// (a reflector reconnects on its own 30-60 s backoff after an apiserver outage), so a
// replica can see a container's Service but not yet its record and Deployment, or a
// Deployment deleted minutes ago.
//
// No pods: they only tell a live container's status message, never whether anything is
// deleted, re-created or reported DELETED; the reporter keeps the cache's. That spares
// a LIST of the id's pods per confirmation.
//
// The record is read first, then the workload: a create writes the record before the
// Deployment, so this order never shows a create's Deployment without its record.
// Three requests on the main client: confirmations come only with plans that delete or
// report DELETED, a few per container's life.
func (s *Store) Confirmed(ctx context.Context, id string) (container.Snapshot, error) {
	var snap container.Snapshot
	record, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, container.RecordName(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return snap, classify("reading the container record", err)
	default:
		if rec, ok := container.RecordOf(record, id); ok {
			snap.Record = &rec
		}
	}
	sel := metav1.ListOptions{LabelSelector: container.InstanceSelector(id)}
	deps, err := s.client.AppsV1().Deployments(s.namespace).List(ctx, sel)
	if err != nil {
		return snap, classify("listing Deployments", err)
	}
	snap.Deployments = container.DeploymentsOf(deps.Items)
	// Oldest first, as the cache's snapshot: Live() picks the oldest live one.
	slices.SortStableFunc(snap.Deployments, func(a, b *container.Deployment) int {
		return a.Created.Compare(b.Created)
	})
	svcs, err := s.client.CoreV1().Services(s.namespace).List(ctx, sel)
	if err != nil {
		return snap, classify("listing Services", err)
	}
	for i := range svcs.Items {
		v := container.ServiceOf(&svcs.Items[i])
		snap.Services = append(snap.Services, &v)
	}
	return snap, nil
}
