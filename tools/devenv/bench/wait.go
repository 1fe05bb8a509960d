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

// settle waits until the apiserver has been quiet for 6 s (under quietRate writes and
// quietRate reads a second, in 2-s samples; leases and leader elections alone make a
// few) or timeout has passed, and returns how long it waited. Reads count here: a
// restarted controller-manager's garbage collector GETs thousands of owners, and the
// CPU that takes from the apiserver would be measured as the service's.
func (e *Env) settle(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	took, err := e.quietFor(ctx, timeout, 2*time.Second, 3, true)
	if err == nil {
		fmt.Fprintf(e.Log, "bench: the control plane quiet after %.0f s\n", took.Seconds())
	}
	return took, err
}

// quietCPU is the most CPU the control plane may use, in percent of one CPU, for
// cpuQuiet to count it as quiet: it used about 4 at 1,000 containers at rest.
const quietCPU = 10

// cpuQuiet waits until the control plane has used under quietCPU in each of 3 samples
// of 2 s in a row, or timeout has passed, and returns how long it waited. A busy
// apiserver slows the service through the CPUs' shared cache, and a LIST page, which
// reads 50 containers, more than a GET.
func (e *Env) cpuQuiet(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	prev := e.sampleCPU(nil)
	took, err := e.quietSamples(ctx, start, timeout, 2*time.Second, 3, "the control plane still uses CPU", func() (bool, error) {
		cur := e.sampleCPU(nil)
		use := cpuUse(prev, cur)
		prev = cur
		var used float64
		for _, p := range e.Cluster.Processes {
			used += use[p.Name]
		}
		return used < quietCPU, nil
	})
	if err == nil {
		fmt.Fprintf(e.Log, "bench: the control plane's CPU quiet after %.0f s more\n", took.Seconds())
	}
	return took, err
}

// quietRate is the most requests a second of each sort (writes; reads of resources)
// that still count as quiet.
const quietRate = 10

// quietFor waits until the apiserver has had fewer than quietRate writes a second (and,
// with reads, fewer than quietRate GETs and LISTs of resources) in each of n samples of
// window in a row, or timeout has passed, and returns how long it waited.
func (e *Env) quietFor(ctx context.Context, timeout, window time.Duration, n int, reads bool) (time.Duration, error) {
	start := time.Now()
	count := func() (writes, gets float64, err error) {
		m, err := e.APIServerMetrics(ctx)
		if err != nil {
			return 0, 0, err
		}
		for k, v := range m {
			vb := labelVerb.FindStringSubmatch(k)
			if vb == nil || !strings.HasPrefix(k, "apiserver_request_total{") {
				continue
			}
			switch vb[1] {
			case "POST", "PUT", "PATCH", "DELETE":
				writes += v
			case "GET", "LIST":
				if r := labelResource.FindStringSubmatch(k); r != nil && r[1] != "" && reads {
					gets += v
				}
			}
		}
		return writes, gets, nil
	}
	prevW, prevR, err := count()
	if err != nil {
		return 0, err
	}
	return e.quietSamples(ctx, start, timeout, window, n, "the apiserver still busy", func() (bool, error) {
		w, r, err := count()
		if err != nil {
			return false, err
		}
		quiet := (w-prevW)/window.Seconds() < quietRate && (r-prevR)/window.Seconds() < quietRate
		prevW, prevR = w, r
		return quiet, nil
	})
}

// quietSamples calls quiet after each window until it has held n times in a row, or
// timeout has passed since start (logged with busy: the caller measures anyway), and
// returns how long it waited since start.
func (e *Env) quietSamples(ctx context.Context, start time.Time, timeout, window time.Duration, n int, busy string, quiet func() (bool, error)) (time.Duration, error) {
	for held := 0; held < n; {
		if time.Since(start) > timeout {
			fmt.Fprintf(e.Log, "bench: %s after %s; measuring anyway\n", busy, timeout)
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		q, err := quiet()
		if err != nil {
			return 0, err
		}
		if q {
			held++
		} else {
			held = 0
		}
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
