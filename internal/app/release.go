package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// Release is `k8s-container-sp release`: it lets go of everything the provider holds in
// its namespace (see store.Release), leaving every workload running, and removes the
// leader election Lease, so the provider can be uninstalled or replaced by the reference
// provider. It refuses while a replica still runs (the leader Lease is being renewed),
// unless force: a running replica would write the records again.
func Release(ctx context.Context, cfg *config.Config, rc *rest.Config, force bool, out io.Writer) error {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ns := cfg.Kubernetes.Namespace
	leases := client.CoordinationV1().Leases(ns)
	leader, err := leases.Get(ctx, cfg.Monitor.LeaderLease, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		leader = nil
	case err != nil:
		return fmt.Errorf("reading the leader Lease %s/%s: %w", ns, cfg.Monitor.LeaderLease, err)
	}
	if leader != nil && !force {
		s := leader.Spec
		if s.HolderIdentity != nil && *s.HolderIdentity != "" && s.RenewTime != nil && s.LeaseDurationSeconds != nil &&
			time.Since(s.RenewTime.Time) < 3*time.Duration(*s.LeaseDurationSeconds)*time.Second {
			return fmt.Errorf("replica %q still runs (it renewed Lease %s/%s %s ago): stop every replica first, or pass -force",
				*s.HolderIdentity, ns, leader.Name, time.Since(s.RenewTime.Time).Round(time.Second))
		}
	}
	rep, err := store.Release(ctx, client, ns)
	if err != nil {
		return err
	}
	if leader != nil {
		if err := leases.Delete(ctx, leader.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the leader Lease: %w", err)
		}
	}
	fmt.Fprintf(out, "namespace %s: %d container records deleted; workloads left running\n", ns, len(rep.Records))
	if len(rep.Owed) > 0 {
		fmt.Fprintf(out, "DELETED was still owed to DCM for (now never sent by this provider): %s\n", strings.Join(rep.Owed, " "))
	}
	return nil
}
