package store

import (
	"context"
	"errors"

	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// ErrNotFound is returned for an unknown container id.
var ErrNotFound = &kubeerr.Error{Kind: kubeerr.KindNotFound, Message: "container not found"}

// explainForbidden turns an RBAC refusal of a write into an error naming what is missing.
func (s *Store) explainForbidden(ctx context.Context, err error) error {
	var se *kubeerr.Error
	if !errors.As(err, &se) || se.Kind != kubeerr.KindPermission {
		return err
	}
	if msg := s.Access.Explain(ctx); msg != "" {
		se.Message = msg
	}
	return se
}
