package app

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/image"
)

// imageResolver is what the API and the status controller resolve images with.
type imageResolver interface {
	Resolve(ctx context.Context, ref string) (image.Resolved, error)
}

// resolver is the image resolver the settings ask for; nil (no interface value) when
// SP_IMAGE_RESOLVE is off, so pods name references as sent.
// With SP_IMAGE_PULL_SECRETS, secrets is the keychain it resolves with (nil: none).
func resolver(cfg *config.Config, client kubernetes.Interface, log *slog.Logger) (imageResolver, *image.PullSecrets, error) {
	if !cfg.Images.Resolve {
		log.Warn("image resolution is off (SP_IMAGE_RESOLVE=false): pods name images as sent, unchecked, and a moved tag changes what a restart runs")
		return nil, nil, nil
	}
	o := cfg.ResolverOptions()
	var secrets *image.PullSecrets
	if names := cfg.PullSecretNames(); len(names) > 0 {
		secrets = &image.PullSecrets{Client: client, Namespace: cfg.Kubernetes.Namespace, Names: names, Log: log}
		o.Keychain = secrets
	}
	r, err := image.New(o)
	if err != nil {
		return nil, nil, err
	}
	log.Info("image resolution on", "mirrors", o.Mirrors, "skip", o.Skip, "max_bytes", o.MaxBytes, "pull_secrets", cfg.PullSecretNames())
	return r, secrets, nil
}

// pullSecretsComponent reads the pull secrets before the API serves, then every minute.
func (a *App) pullSecretsComponent() component {
	c := component{name: "image-pull-secrets"}
	if p := a.pullSecrets; p != nil {
		c.start = func(ctx context.Context) error { p.Refresh(ctx); return nil }
		c.run = p.Run
	}
	return c
}
