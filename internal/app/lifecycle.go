package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/httpapi"
)

// component is one part of the service. Components start in order and stop in reverse.
type component struct {
	name string
	// start, when set, does what the components after this one need done first (a
	// setting read from the cluster, a connection dialled) and returns; they start only
	// once it has. An error stops the service from starting.
	start func(ctx context.Context) error
	// run, when set, runs the part until its context ends, stops it, and returns. It
	// returns before that only when the part failed or cannot go on.
	run func(ctx context.Context) error
	// stopWithin, when set, bounds the wait for run to return once its context is
	// cancelled; past it the stop goes on to the next component (what the part left
	// undone is what a crash would leave, which the service recovers from).
	stopWithin time.Duration
}

// runInOrder starts the components in the order given: each one's start, then its run
// in the background, then the next one's. The runs do not wait for one another (a run
// that needs something of another waits for it itself). When ctx ends, a run returns on
// its own, or a start fails, it stops the components started so far in reverse order:
// each one's context is cancelled only after every component started after it has
// stopped. So a component may rely on those before it for as long as it runs. It
// returns the first error, named after its component (a run returning on its own
// without an error is one too: the service cannot run without it).
func runInOrder(ctx context.Context, log *slog.Logger, comps []component) error {
	return runInOrderWithin(ctx, log, comps, 0)
}

// runInOrderWithin is runInOrder with the whole stop bounded: once the stop begins, the
// components get stopBudget in all (0: no bound), each at most its stopWithin. A
// component that has not stopped when its time is up is logged and left behind, and
// the next one is stopped; those left once the budget is spent are cancelled and not
// waited for. So the process exits within the pod's grace period, whatever hangs.
func runInOrderWithin(ctx context.Context, log *slog.Logger, comps []component, stopBudget time.Duration) error {
	type running struct {
		name       string
		cancel     context.CancelFunc
		done       chan struct{}
		stopWithin time.Duration
	}
	var (
		mu       sync.Mutex
		errs     []error
		failed   = make(chan struct{})
		failOnce sync.Once
	)
	record := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// Starts end when the service stops before they are done.
	starting, stopStarting := context.WithCancel(ctx)
	defer stopStarting()
	go func() {
		select {
		case <-failed:
			stopStarting()
		case <-starting.Done():
		}
	}()
	var started []running
	startFailed := false
	for _, c := range comps {
		if c.start != nil {
			if err := c.start(starting); err != nil {
				if starting.Err() == nil { // not merely cut short by a stop
					record(fmt.Errorf("%s: %w", c.name, err))
				}
				startFailed = true
				break
			}
			log.Debug("started", "component", c.name)
		}
		if starting.Err() != nil {
			break
		}
		if c.run == nil {
			continue
		}
		// Not derived from ctx: stopping is this function's job, in order.
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		started = append(started, running{c.name, cancel, done, c.stopWithin})
		go func() {
			defer close(done)
			err := c.run(cctx)
			if cctx.Err() == nil && err == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil {
				record(fmt.Errorf("%s: %w", c.name, err))
			}
			if cctx.Err() == nil {
				failOnce.Do(func() { close(failed) })
			}
		}()
	}
	if !startFailed {
		select {
		case <-ctx.Done():
		case <-failed:
		}
	}
	var budget <-chan time.Time // nil: unbounded
	if stopBudget > 0 {
		t := time.NewTimer(stopBudget)
		defer t.Stop()
		budget = t.C
	}
	spent := false
	for i := len(started) - 1; i >= 0; i-- {
		c := started[i]
		c.cancel()
		if spent {
			continue
		}
		var own <-chan time.Time
		if c.stopWithin > 0 {
			t := time.NewTimer(c.stopWithin)
			own = t.C
			defer t.Stop()
		}
		select {
		case <-c.done:
			log.Debug("stopped", "component", c.name)
		case <-own:
			log.Warn("component did not stop in its time; going on with the stop", "component", c.name, "within", c.stopWithin.String())
		case <-budget:
			log.Warn("stop budget spent; leaving the components not yet stopped", "component", c.name, "budget", stopBudget.String())
			spent = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// stopGate makes readiness fail as soon as the service begins to stop: its component
// goes last, so runInOrder stops it first, before the controller drains and before the
// HTTP server shuts down. Load balancers and the Service's endpoints then move traffic
// away while the API still answers the requests that arrive meanwhile.
type stopGate struct {
	stopping atomic.Bool
	at       atomic.Pointer[time.Time] // when the stop began
}

func (g *stopGate) component() component {
	return component{name: "readiness", run: func(ctx context.Context) error {
		<-ctx.Done()
		now := time.Now()
		g.at.Store(&now)
		g.stopping.Store(true)
		return nil
	}}
}

// since is when the stop began (now, if it has not: a failed start).
func (g *stopGate) since() time.Time {
	if t := g.at.Load(); t != nil {
		return *t
	}
	return time.Now()
}

// check is the readiness condition: not stopping.
func (g *stopGate) check() httpapi.Check {
	return httpapi.Check{Name: "stopping", Err: func() error {
		if g.stopping.Load() {
			return errorString("the provider is shutting down")
		}
		return nil
	}}
}
