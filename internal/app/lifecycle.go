package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// component is one long-running part of the service. run starts it and returns only
// once its context has ended and the part has stopped (or when it fails).
type component struct {
	name string
	run  func(ctx context.Context) error
}

// runInOrder starts the components in the order given and, when ctx ends or any of them
// returns on its own, stops them in reverse order: each one's context is cancelled only
// after every component started after it has stopped. So a component may rely on those
// before it for as long as it runs. It returns the first error (a component returning
// on its own without an error is one too: the service cannot run without it).
func runInOrder(ctx context.Context, log *slog.Logger, comps []component) error {
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
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
	started := make([]running, 0, len(comps))
	for _, c := range comps {
		// Not derived from ctx: stopping is this function's job, in order.
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		started = append(started, running{cancel, done})
		go func() {
			defer close(done)
			err := c.run(cctx)
			if cctx.Err() == nil {
				if err == nil {
					err = errors.New("stopped unexpectedly")
				}
				failOnce.Do(func() { close(failed) })
			}
			if err != nil {
				record(fmt.Errorf("%s: %w", c.name, err))
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-failed:
	}
	for i := len(started) - 1; i >= 0; i-- {
		started[i].cancel()
		<-started[i].done
		log.Debug("stopped", "component", comps[i].name)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
