package store

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// ReleaseReport says what Release changed.
type ReleaseReport struct {
	// Records are the ids whose record was deleted.
	Records []string
	// Owed are those of Records whose DELETED was undelivered: this provider won't send it.
	Owed []string
}

// Release lets go of everything this provider holds in namespace, for an uninstall or a
// return to the reference provider: each record loses its finalizer and is deleted with
// orphan propagation, so workloads keep running. It is idempotent, so a rerun finishes.
func Release(ctx context.Context, client kubernetes.Interface, namespace string) (ReleaseReport, error) {
	var rep ReleaseReport
	sel := metav1.ListOptions{LabelSelector: container.LabelManagedBy + "=" + container.ManagedByValue}
	records, err := client.CoreV1().ConfigMaps(namespace).List(ctx, sel)
	if err != nil {
		return rep, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	for i := range records.Items {
		c := &records.Items[i]
		id := container.InstanceID(c.Labels)
		rec, ok := container.RecordOf(c, id)
		if !ok {
			continue
		}
		if err := releaseRecord(ctx, client, namespace, rec); err != nil {
			return rep, fmt.Errorf("deleting the record of %s: %w", id, err)
		}
		rep.Records = append(rep.Records, id)
		if rec.Owed && rec.Terminating { // deleted, its DELETED not delivered
			rep.Owed = append(rep.Owed, id)
		}
	}
	return rep, nil
}

// releaseRecord takes a record's finalizer off and deletes it, orphaning what it owns;
// gone or replaced meanwhile is success.
func releaseRecord(ctx context.Context, client kubernetes.Interface, ns string, rec container.Record) error {
	if err := dropFinalizerOf(ctx, client, ns, rec.Name, rec.UID); err != nil {
		return err
	}
	return deleteRecordIfThere(ctx, client, ns, rec.Name, rec.UID, metav1.DeletePropagationOrphan)
}
