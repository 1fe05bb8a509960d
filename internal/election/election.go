package election

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election timings: a leader that dies holding the lock is replaced within
// LeaseDuration + RetryPeriod; one that resigns (a graceful stop), at once.
const (
	LeaseDuration = 12 * time.Second
	RenewDeadline = 8 * time.Second
	RetryPeriod   = 2 * time.Second
)

// Leader is what runs while this replica leads: the status controller.
type Leader interface {
	// Run works until ctx ends (leadership lost: stop at once) or drain closes (finish first).
	Run(ctx context.Context, drain <-chan struct{})
}

// Election runs Leader on the one replica holding the ConfigMapLock Name in Namespace.
type Election struct {
	Client              kubernetes.Interface
	Namespace, Name, ID string
	Leader              Leader
	// OnChange is told when this replica gains or loses the leadership; optional.
	OnChange func(leading bool)
	Log      *slog.Logger
}

// Run campaigns until ctx ends, running the leader while leading and campaigning again
// after a loss. On ctx end the leader first delivers what is pending, then the lock is
// released at once (ReleaseOnCancel) so the next leader need not wait for it to expire.
func (e *Election) Run(ctx context.Context) error {
	// The election outlives ctx: it is cancelled only once the controller has drained.
	electionCtx, resign := context.WithCancel(context.WithoutCancel(ctx))
	defer resign()
	var (
		mu       sync.Mutex
		stopping bool
		leading  sync.WaitGroup
	)
	lead := func(leadCtx context.Context) {
		mu.Lock()
		if stopping {
			mu.Unlock()
			return
		}
		leading.Add(1)
		mu.Unlock()
		defer leading.Done()
		e.Leader.Run(leadCtx, ctx.Done())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.campaign(electionCtx, lead)
	}()

	<-ctx.Done()
	mu.Lock()
	stopping = true
	mu.Unlock()
	leading.Wait()
	resign()
	<-done
	return nil
}

// campaign runs client-go's leader election until ctx ends, again after every loss.
func (e *Election) campaign(ctx context.Context, lead func(context.Context)) {
	lock := &ConfigMapLock{
		Namespace: e.Namespace, Name: e.Name,
		Client:     e.Client.CoreV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.ID},
	}
	changed := func(leading bool) {
		if e.OnChange != nil {
			e.OnChange(leading)
		}
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   LeaseDuration,
			RenewDeadline:   RenewDeadline,
			RetryPeriod:     RetryPeriod,
			ReleaseOnCancel: true,
			Name:            e.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					e.Log.Info("status: became the leader", "identity", e.ID, "lock", "ConfigMap "+e.Name)
					changed(true)
					lead(ctx)
				},
				OnStoppedLeading: func() {
					e.Log.Info("status: not the leader", "identity", e.ID)
					changed(false)
				},
			},
		})
	}
}
