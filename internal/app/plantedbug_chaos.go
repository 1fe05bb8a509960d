//go:build chaosbug

package app

import (
	"context"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// plantBug, only in `sp-chaos -inject drop-unsent-deleted` builds (-tags chaosbug): a
// DELETED that cannot be published (NATS down) is reported stored, so the controller
// finalizes its record as if the deleted-report-owed finalizer were not honoured. The
// chaos run must report the lost DELETED.
func plantBug(p status.Publisher) status.Publisher { return droppingDeleted{p} }

type droppingDeleted struct{ status.Publisher }

func (d droppingDeleted) Publish(ctx context.Context, eventID, id string, rep status.Report) (bool, error) {
	stored, err := d.Publisher.Publish(ctx, eventID, id, rep)
	if err != nil && rep.Status.Status == v1alpha1.DELETED {
		return true, nil
	}
	return stored, err
}
