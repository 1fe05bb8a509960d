package app

import (
	"context"
	"log/slog"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// imageResolver is what the API and the status controller resolve images with.
type imageResolver interface {
	Resolve(ctx context.Context, ref string) (image.Resolved, error)
}

// resolver is the image resolver the settings ask for; nil (no interface value) when
// SP_IMAGE_RESOLVE is off, so pods name references as sent.
func resolver(cfg *config.Config, log *slog.Logger) (imageResolver, error) {
	if !cfg.Images.Resolve {
		log.Warn("image resolution is off (SP_IMAGE_RESOLVE=false): pods name images as sent, unchecked, and a moved tag changes what a restart runs")
		return nil, nil
	}
	r, err := image.New(cfg.ResolverOptions())
	if err != nil {
		return nil, err
	}
	o := cfg.ResolverOptions()
	log.Info("image resolution on", "mirrors", o.Mirrors, "skip", o.Skip, "max_bytes", o.MaxBytes)
	return r, nil
}
