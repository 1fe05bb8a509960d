package status

import (
	"fmt"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// recorder collects what the debouncer fired, with the fake time of each fire. The
// fake clock runs timer callbacks while it holds its lock, so fire must not ask the
// clock: the recorder keeps the elapsed time itself.
type recorder struct {
	clock   *clocktesting.FakeClock
	elapsed time.Duration
	fired   []fire
}

type fire struct {
	key string
	at  time.Duration
}

func newRecorder() *recorder {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &recorder{clock: c}
}

func (r *recorder) step(d time.Duration) {
	r.elapsed += d
	r.clock.Step(d)
}

func (r *recorder) fire(key string) { r.fired = append(r.fired, fire{key, r.elapsed}) }

func TestDebounce(t *testing.T) {
	const ms = time.Millisecond
	cases := []struct {
		name          string
		wait, maxWait time.Duration
		touchEvery    time.Duration // 0: one touch
		touches       int
		runFor        time.Duration
		want          []time.Duration // fire times of key "a"
	}{
		{"one touch fires after the quiet window", 100 * ms, time.Second, 0, 1, time.Second, []time.Duration{100 * ms}},
		{"a burst collapses into one fire, quiet window after its last touch",
			100 * ms, time.Second, 5 * ms, 10, time.Second, []time.Duration{145 * ms}},
		{"never quiet: fired every max wait", 100 * ms, 300 * ms, 20 * ms, 50, time.Second,
			[]time.Duration{300 * ms, 600 * ms, 900 * ms}},
		{"max wait below wait is raised to wait", 100 * ms, 10 * ms, 0, 1, time.Second, []time.Duration{100 * ms}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			d := newDebouncer(r.clock, tc.wait, tc.maxWait, r.fire)
			for i := range tc.touches {
				if i > 0 {
					r.step(tc.touchEvery)
				}
				d.touch("a")
			}
			for r.elapsed < tc.runFor {
				r.step(ms)
			}
			var got []time.Duration
			for _, f := range r.fired {
				got = append(got, f.at)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("fired at %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDebounceKeysAreIndependentAndFlush(t *testing.T) {
	r := newRecorder()
	d := newDebouncer(r.clock, time.Hour, time.Hour, r.fire)
	d.touch("a")
	d.touch("b")
	d.touch("a")
	if d.pending() != 2 {
		t.Fatalf("pending %d", d.pending())
	}
	d.flush()
	d.touch("c") // after flush: ignored (stopping)
	r.step(2 * time.Hour)
	got := map[string]int{}
	for _, f := range r.fired {
		got[f.key]++
	}
	if got["a"] != 1 || got["b"] != 1 || got["c"] != 0 || d.pending() != 0 {
		t.Errorf("fired %v", got)
	}
}

func TestDebounceZeroFiresAtOnce(t *testing.T) {
	r := newRecorder()
	d := newDebouncer(r.clock, 0, 0, r.fire)
	d.touch("a")
	d.touch("a")
	if len(r.fired) != 2 {
		t.Errorf("fired %d, want 2", len(r.fired))
	}
}

// Keys due in the same millisecond share one timer, so a relist that touches every
// container at once arms a few timers, not one (and, when it fires, a goroutine) per
// container.
func TestDebounceKeysDueTogetherShareATimer(t *testing.T) {
	r := newRecorder()
	d := newDebouncer(r.clock, 100*time.Millisecond, time.Second, r.fire)
	for i := range 1000 {
		d.touch(fmt.Sprint(i))
	}
	r.step(time.Millisecond / 2)
	d.touch("later")
	if n := len(d.ticks); n != 2 || r.clock.Waiters() != 2 {
		t.Fatalf("%d ticks, %d timers for 1001 keys touched within 2 ms; want 2", n, r.clock.Waiters())
	}
	r.step(100 * time.Millisecond)
	if len(r.fired) != 1000 || d.pending() != 1 {
		t.Errorf("fired %d, pending %d; want 1000, 1", len(r.fired), d.pending())
	}
	r.step(time.Millisecond)
	if len(r.fired) != 1001 || d.pending() != 0 || len(d.ticks) != 0 {
		t.Errorf("fired %d, pending %d, ticks %d", len(r.fired), d.pending(), len(d.ticks))
	}
}
