package image

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PullSecretsRefresh is how often the pull secrets are read again, so a rotated
// registry token is used within it.
const PullSecretsRefresh = time.Minute

// PullSecrets is a keychain of the namespace's pull secrets that every pod is given
// (SP_IMAGE_PULL_SECRETS), so the provider resolves with the credentials the pods pull
// with, as Knative does with k8schain. One GET per secret per refresh, never per create.
type PullSecrets struct {
	Client    kubernetes.Interface
	Namespace string
	Names     []string
	Log       *slog.Logger

	keychain atomic.Pointer[authn.Keychain]
}

// Resolve is authn.Keychain's: anonymous until the first read.
func (p *PullSecrets) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if kc := p.keychain.Load(); kc != nil {
		return (*kc).Resolve(r)
	}
	return authn.Anonymous, nil
}

// Refresh reads the secrets once; one that cannot be read is left out, and logged.
func (p *PullSecrets) Refresh(ctx context.Context) {
	var secrets []corev1.Secret
	for _, name := range p.Names {
		s, err := p.Client.CoreV1().Secrets(p.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			p.Log.Warn("image pull secret not read: images it grants stay PENDING", "secret", name, "error", err)
			continue
		}
		secrets = append(secrets, *s)
	}
	kc, err := kauth.NewFromPullSecrets(ctx, secrets)
	if err != nil {
		p.Log.Warn("image pull secrets not usable", "error", err)
		return
	}
	p.keychain.Store(&kc)
}

// Run reads the secrets again every PullSecretsRefresh until ctx ends (Refresh read
// them first).
func (p *PullSecrets) Run(ctx context.Context) error {
	t := time.NewTicker(PullSecretsRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.Refresh(ctx)
		}
	}
}
