package store

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// ReleaseReport says what Release changed.
type ReleaseReport struct {
	// Untied are the Deployments and Services ("Kind/name") whose ties were removed.
	Untied []string
	// Records are the ids whose record was deleted.
	Records []string
	// Owed are the ids among Records whose DELETED had not been delivered: DCM will
	// not be told by this provider any more.
	Owed []string
}

// Release lets go of everything this provider (this version or an earlier one) holds in
// namespace, for an uninstall or a return to the reference provider: the ties of earlier
// versions on Deployments and Services are removed first, then every container record is
// deleted (its finalizer removed). Workloads are never deleted or changed otherwise.
// It is idempotent; a failure stops before any record is deleted that still ties a
// workload, so running it again finishes the job.
func Release(ctx context.Context, client kubernetes.Interface, namespace string) (ReleaseReport, error) {
	var rep ReleaseReport
	sel := metav1.ListOptions{LabelSelector: container.LabelManagedBy + "=" + container.ManagedByValue}
	deps, err := client.AppsV1().Deployments(namespace).List(ctx, sel)
	if err != nil {
		return rep, fmt.Errorf("listing Deployments: %w", err)
	}
	if err := untieAll(ctx, client, namespace, "Deployment", deps.Items, &rep); err != nil {
		return rep, err
	}
	svcs, err := client.CoreV1().Services(namespace).List(ctx, sel)
	if err != nil {
		return rep, fmt.Errorf("listing Services: %w", err)
	}
	if err := untieAll(ctx, client, namespace, "Service", svcs.Items, &rep); err != nil {
		return rep, err
	}
	// Only now: with no tie left, deleting a record deletes nothing else.
	leases, err := client.CoordinationV1().Leases(namespace).List(ctx, sel)
	if err != nil {
		return rep, fmt.Errorf("listing Leases: %w", err)
	}
	for i := range leases.Items {
		l := &leases.Items[i]
		id := container.InstanceID(l.Labels)
		rec, ok := container.RecordOf(l, id)
		if !ok {
			continue
		}
		if err := releaseRecordAnyway(ctx, client, namespace, rec); err != nil {
			return rep, fmt.Errorf("deleting the record of %s: %w", id, err)
		}
		rep.Records = append(rep.Records, id)
		if rec.Owed {
			rep.Owed = append(rep.Owed, id)
		}
	}
	return rep, nil
}

// untieAll removes the legacy ties of every tied object in items.
func untieAll[T any, P interface {
	*T
	metav1.Object
}](ctx context.Context, client kubernetes.Interface, ns, kind string, items []T, rep *ReleaseReport) error {
	for i := range items {
		if o := P(&items[i]); container.LegacyTied(o) {
			if err := untieObject(ctx, client, ns, o); err != nil {
				return fmt.Errorf("untying %s %s: %w", kind, o.GetName(), err)
			}
			rep.Untied = append(rep.Untied, kind+"/"+o.GetName())
		}
	}
	return nil
}

// releaseRecordAnyway deletes a record whether or not its DELETED was delivered.
func releaseRecordAnyway(ctx context.Context, client kubernetes.Interface, ns string, rec container.Record) error {
	c := client.CoordinationV1().Leases(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Get(ctx, rec.Name, metav1.GetOptions{})
		if err != nil || cur.UID != rec.UID || !rec.Owed {
			return err
		}
		cur.Finalizers = withoutRecordFinalizer(cur.Finalizers)
		_, err = c.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	uid := rec.UID
	err = c.Delete(ctx, rec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
