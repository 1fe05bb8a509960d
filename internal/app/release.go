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
	"github.com/dcm-project/k8s-container-sp/internal/election"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// Release is `k8s-container-sp release`: it lets go of everything the provider holds in
// its namespace (see store.Release), leaving every workload running, and removes the
// leader election's lock ConfigMap, so the provider can be uninstalled or replaced by the reference
// provider. It refuses while a replica still runs (the lock is being renewed), unless
// force: a running replica would write the records again.
func Release(ctx context.Context, cfg *config.Config, rc *rest.Config, force bool, out io.Writer) error {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ns, name := cfg.Kubernetes.Namespace, cfg.Monitor.LeaderLease
	lock := &election.ConfigMapLock{Namespace: ns, Name: name, Client: client.CoreV1()}
	held, _, err := lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		held = nil
	case err != nil:
		return fmt.Errorf("reading the leader election's ConfigMap %s/%s: %w", ns, name, err)
	}
	if !force && held != nil && renewed(held.HolderIdentity, held.RenewTime.Time, held.LeaseDurationSeconds, time.Now()) {
		return fmt.Errorf("replica %q still runs (it renewed ConfigMap %s/%s %s ago): stop every replica first, or pass -force",
			held.HolderIdentity, ns, name, time.Since(held.RenewTime.Time).Round(time.Second))
	}
	rep, err := store.Release(ctx, client, ns)
	if err != nil {
		return err
	}
	if held != nil {
		if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the leader election's ConfigMap: %w", err)
		}
	}
	fmt.Fprintf(out, "namespace %s: %d container records deleted; workloads left running\n", ns, len(rep.Records))
	if len(rep.Owed) > 0 {
		fmt.Fprintf(out, "DELETED was still owed to DCM for (now never sent by this provider): %s\n", strings.Join(rep.Owed, " "))
	}
	return nil
}

// renewed decides whether a leader election record shows a running replica: held, and
// renewed within three lease durations of now.
func renewed(holder string, renew time.Time, leaseSeconds int, now time.Time) bool {
	return holder != "" && !renew.IsZero() && leaseSeconds > 0 &&
		now.Sub(renew) < 3*time.Duration(leaseSeconds)*time.Second
}
