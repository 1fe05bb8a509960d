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
	if p.configured != "auto" {
		p.log.Info("pod security profile", "profile", p.configured, "why", "SP_K8S_POD_SECURITY")
		return container.PodSecurity(p.configured)
	}
	ctx, cancel := context.WithTimeout(ctx, podSecurityReadTimeout)
	defer cancel()
	ns, err := p.client.CoreV1().Namespaces().Get(ctx, p.namespace, metav1.GetOptions{})
	if err != nil {
		p.log.Warn("pod security profile: cannot read the namespace's Pod Security labels; using baseline "+
			"(set SP_K8S_POD_SECURITY, or grant get on the namespace)", "profile", "baseline", "err", err)
		return container.Baseline
	}
	const enforce = "pod-security.kubernetes.io/enforce"
	if ns.Labels[enforce] == string(container.Restricted) {
		p.log.Info("pod security profile", "profile", "restricted", "why", "the namespace enforces "+enforce+"=restricted")
		return container.Restricted
	}
	p.log.Info("pod security profile", "profile", "baseline", "why", "the namespace does not enforce restricted")
	return container.Baseline
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
