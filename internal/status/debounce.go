package status

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// debouncer calls fire(key) once a key has been quiet for wait, but never later than
// maxWait after the first of a burst of touches: rapid oscillation collapses into one
// report, while a key that never settles is still reported at least every maxWait.
type debouncer struct {
	wait, maxWait time.Duration
	fire          func(key string)
	clock         clock.WithDelayedExecution

	mu     sync.Mutex
	bursts map[string]*burst
	closed bool
}

type burst struct {
	first time.Time
	timer clock.Timer
}

func newDebouncer(clk clock.WithDelayedExecution, wait, maxWait time.Duration, fire func(string)) *debouncer {
	if maxWait < wait {
		maxWait = wait
	}
	return &debouncer{wait: wait, maxWait: maxWait, fire: fire, clock: clk, bursts: map[string]*burst{}}
}

// touch records a change of key.
func (d *debouncer) touch(key string) {
	if d.wait <= 0 {
		d.fire(key)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	now := d.clock.Now()
	b, ok := d.bursts[key]
	if !ok {
		b = &burst{first: now}
		d.bursts[key] = b
		b.timer = d.clock.AfterFunc(d.wait, func() { d.expire(key, b) })
		return
	}
	// Quiet for wait from now, capped at maxWait from the burst's start.
	delay := min(d.wait, b.first.Add(d.maxWait).Sub(now))
	b.timer.Reset(max(delay, 0))
}

func (d *debouncer) expire(key string, b *burst) {
	d.mu.Lock()
	if d.bursts[key] != b {
		d.mu.Unlock()
		return
	}
	delete(d.bursts, key)
	d.mu.Unlock()
	d.fire(key)
}

// flush fires every pending key now (graceful stop) and stops accepting touches.
func (d *debouncer) flush() {
	d.mu.Lock()
	keys := make([]string, 0, len(d.bursts))
	for k, b := range d.bursts {
		b.timer.Stop()
		keys = append(keys, k)
	}
	d.bursts = map[string]*burst{}
	d.closed = true
	d.mu.Unlock()
	for _, k := range keys {
		d.fire(k)
	}
}

// pending is how many keys wait for their timer.
func (d *debouncer) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.bursts)
}
