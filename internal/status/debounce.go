package status

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// debouncer calls fire(key) once key has been quiet for wait, but no later than maxWait
// after a burst's first touch: oscillation collapses into one report that still comes.
// Keys due in the same millisecond share one timer (a tick), since a relist touches every
// key at once and a timer per key would start that many goroutines, which Go never frees.
type debouncer struct {
	wait, maxWait time.Duration
	fire          func(key string)
	clock         clock.WithDelayedExecution

	mu     sync.Mutex
	bursts map[string]*burst
	ticks  map[time.Time]*tick
	closed bool
}

type burst struct {
	first, due time.Time
}

// tick is one timer and the keys due at it; a key touched since is due at a later tick.
type tick struct {
	timer clock.Timer
	keys  []string
}

// grain is the debouncer's resolution: each time is rounded up to it.
const grain = time.Millisecond

func newDebouncer(clk clock.WithDelayedExecution, wait, maxWait time.Duration, fire func(string)) *debouncer {
	if maxWait < wait {
		maxWait = wait
	}
	return &debouncer{wait: wait, maxWait: maxWait, fire: fire, clock: clk,
		bursts: map[string]*burst{}, ticks: map[time.Time]*tick{}}
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
	}
	// Quiet for wait from now, capped at maxWait from the burst's start.
	due := now.Add(min(d.wait, max(b.first.Add(d.maxWait).Sub(now), 0)))
	if r := due.Truncate(grain); r.Before(due) {
		due = r.Add(grain)
	}
	if due.Equal(b.due) {
		return
	}
	b.due = due
	t, ok := d.ticks[due]
	if !ok {
		t = &tick{}
		d.ticks[due] = t
		t.timer = d.clock.AfterFunc(due.Sub(now), func() { d.expire(due) })
	}
	t.keys = append(t.keys, key)
}

// expire fires the keys still due at tick due; no clock calls, as a fake clock runs it locked.
func (d *debouncer) expire(due time.Time) {
	d.mu.Lock()
	t := d.ticks[due]
	delete(d.ticks, due)
	var keys []string
	if t != nil {
		for _, k := range t.keys {
			if b := d.bursts[k]; b != nil && b.due.Equal(due) {
				delete(d.bursts, k)
				keys = append(keys, k)
			}
		}
	}
	if len(d.bursts) == 0 {
		// A Go map keeps its buckets once grown: reset, so an idle debouncer holds nothing.
		d.bursts, d.ticks = map[string]*burst{}, map[time.Time]*tick{}
	}
	d.mu.Unlock()
	for _, k := range keys {
		d.fire(k)
	}
}

// flush fires every pending key now (graceful stop) and stops accepting touches.
func (d *debouncer) flush() {
	d.mu.Lock()
	keys := make([]string, 0, len(d.bursts))
	for k := range d.bursts {
		keys = append(keys, k)
	}
	for _, t := range d.ticks {
		t.timer.Stop()
	}
	d.bursts, d.ticks = map[string]*burst{}, map[time.Time]*tick{}
	d.closed = true
	d.mu.Unlock()
	for _, k := range keys {
		d.fire(k)
	}
}

// pending is how many keys wait for their tick.
func (d *debouncer) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.bursts)
}
