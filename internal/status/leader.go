package status

import (
	"context"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election timings: a new leader takes over at most LeaseDuration + RetryPeriod after
// the old one died without releasing (about 14 s), at once after a graceful release.
const (
	LeaseDuration = 12 * time.Second
	RenewDeadline = 8 * time.Second
	RetryPeriod   = 2 * time.Second
)

// LeaderLoop runs lead while this replica holds the Lease name in namespace, and keeps
// campaigning after losing it, until ctx ends (then the Lease is released at once, so
// the next replica does not wait for it to expire). onChange reports leadership.
func LeaderLoop(ctx context.Context, client kubernetes.Interface, namespace, name, identity string,
	lead func(context.Context), onChange func(bool), log *slog.Logger) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   LeaseDuration,
			RenewDeadline:   RenewDeadline,
			RetryPeriod:     RetryPeriod,
			ReleaseOnCancel: true,
			Name:            name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					log.Info("status: became the leader", "identity", identity, "lease", name)
					onChange(true)
					lead(ctx)
				},
				OnStoppedLeading: func() {
					log.Info("status: not the leader", "identity", identity)
					onChange(false)
				},
			},
		})
	}
}
