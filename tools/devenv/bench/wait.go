package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// parallel runs f(i) for i in [from, to) on workers goroutines.
func parallel(workers, from, to int, f func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// settle waits until the apiserver has been quiet for 6 s (under quietWrites writes a
// second, in 2-s samples; node and leader leases alone write a few) or timeout has
// passed, and returns how long it waited.
func (e *Env) settle(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	took, err := e.quietFor(ctx, timeout, 2*time.Second, 3)
	if err == nil {
		fmt.Fprintf(e.Log, "bench: the control plane quiet after %.0f s\n", took.Seconds())
	}
	return took, err
}

// quietFor waits until the apiserver has had fewer than quietWrites writes a second in
// each of n samples of window in a row, or timeout has passed, and returns how long it
// waited.
func (e *Env) quietFor(ctx context.Context, timeout, window time.Duration, n int) (time.Duration, error) {
	const quietWrites = 10
	start := time.Now()
	writes := func() (float64, error) {
		m, err := e.APIServerMetrics(ctx)
		if err != nil {
			return 0, err
		}
		var n float64
		for k, v := range m {
			if vb := labelVerb.FindStringSubmatch(k); vb != nil && strings.HasPrefix(k, "apiserver_request_total{") {
				switch vb[1] {
				case "POST", "PUT", "PATCH", "DELETE":
					n += v
				}
			}
		}
		return n, nil
	}
	prev, err := writes()
	if err != nil {
		return 0, err
	}
	for quiet := 0; quiet < n; {
		if time.Since(start) > timeout {
			fmt.Fprintf(e.Log, "bench: the apiserver still busy after %s; measuring anyway\n", timeout)
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		cur, err := writes()
		if err != nil {
			return 0, err
		}
		if (cur-prev)/window.Seconds() < quietWrites {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
	}
	return time.Since(start), nil
}

func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
