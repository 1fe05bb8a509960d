package app

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// podSecurity is the pods' security profile (SP_K8S_POD_SECURITY): the configured one,
// or with "auto" restricted when the namespace enforces Pod Security "restricted" (so
// pods are admitted), else baseline. With "auto" it is decided when the provider starts
// (a component before the HTTP server, so every create sees it): reading the
// namespace's labels needs `get` on it (a cluster-scoped grant, see
// deploy/base/clusterrole.yaml); without it, baseline, and the log says why.
type podSecurity struct {
	client     kubernetes.Interface
	namespace  string
	configured string // "auto", "baseline" or "restricted"
	log        *slog.Logger
	decided    atomic.Value // container.PodSecurity, once start has run
}

// podSecurityReadTimeout bounds the namespace read.
const podSecurityReadTimeout = 5 * time.Second

// start decides the profile. It never fails: a namespace it cannot read means baseline.
func (p *podSecurity) start(ctx context.Context) error {
	p.decided.Store(p.decide(ctx))
	return nil
}

func (p *podSecurity) decide(ctx context.Context) container.PodSecurity {
	profile, why, err := podSecurityOf(p.configured, func() (map[string]string, error) {
		ctx, cancel := context.WithTimeout(ctx, podSecurityReadTimeout)
		defer cancel()
		ns, err := p.client.CoreV1().Namespaces().Get(ctx, p.namespace, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return ns.Labels, nil
	})
	if err != nil {
		p.log.Warn("pod security profile: cannot read the namespace's Pod Security labels; using baseline "+
			"(set SP_K8S_POD_SECURITY, or grant get on the namespace)", "profile", profile, "err", err)
		return profile
	}
	p.log.Info("pod security profile", "profile", profile, "why", why)
	return profile
}

// podSecurityEnforce is the namespace label of the Pod Security level it enforces.
const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// podSecurityOf decides the profile: the configured one, without reading anything; with
// "auto", restricted when the namespace's labels (readLabels) enforce restricted, else
// baseline, a failed read included (its error is returned for the log). why says what
// decided it.
func podSecurityOf(configured string, readLabels func() (map[string]string, error)) (profile container.PodSecurity, why string, err error) {
	if configured != "auto" {
		return container.PodSecurity(configured), "SP_K8S_POD_SECURITY", nil
	}
	labels, err := readLabels()
	switch {
	case err != nil:
		return container.Baseline, "the namespace's labels cannot be read", err
	case labels[podSecurityEnforce] == string(container.Restricted):
		return container.Restricted, "the namespace enforces " + podSecurityEnforce + "=restricted", nil
	}
	return container.Baseline, "the namespace does not enforce restricted", nil
}

// profile is the decided profile; before start (never so for the HTTP API, which
// starts after it), the configured one, or baseline for "auto".
func (p *podSecurity) profile() container.PodSecurity {
	if v, ok := p.decided.Load().(container.PodSecurity); ok {
		return v
	}
	if p.configured != "auto" {
		return container.PodSecurity(p.configured)
	}
	return container.Baseline
}
