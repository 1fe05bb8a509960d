package status

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// debouncer calls fire(key) once a key has been quiet for wait, but never later than
// maxWait after the first of a burst of touches: rapid oscillation collapses into one
// report, while a key that never settles is still reported at least every maxWait.
//
// Keys whose time comes in the same millisecond share one timer (a tick). A timer of
// its own per key would start a goroutine per key when it fires, and a relist or the
// first list touches every container within milliseconds: at 100,000 containers that
// was 100,000 goroutines at once, whose descriptors Go keeps for good (33 MB of the
// heap in the model). A tick starts one.
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

// tick is one timer and the keys that were due at its time when they were touched (a
// key touched again since is due later, and left for its later tick).
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

// expire fires the keys still due at the tick of time due. It asks nothing of the
// clock (a fake clock runs it holding its own lock).
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
		// A Go map keeps its buckets once grown: after a list touched every container
		// they held 3.6 MB at 100,000 for no key at all.
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
