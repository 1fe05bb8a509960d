package httpapi

import (
	"context"
	"errors"
	"log/slog"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// quotaLogged logs what a ResourceQuota's refusal of a create said (the quota, the
// namespace's usage and limit), which the client's answer leaves out
// (kubeerr.QuotaText): the operator finds it by the request's id.
type quotaLogged struct {
	Store
	log *slog.Logger
}

func (q quotaLogged) Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	obs, err := q.Store.Create(ctx, id, objs)
	var se *kubeerr.Error
	if errors.As(err, &se) && se.Kind == kubeerr.KindQuota && q.log != nil {
		q.log.Warn("create refused by a resource quota", "request_id", RequestID(ctx), "id", id, "err", se.Error())
	}
	return obs, err
}
