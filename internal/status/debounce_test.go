package status

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDebounceCollapsesABurst(t *testing.T) {
	var fired atomic.Int32
	d := newDebouncer(100*time.Millisecond, time.Second, func(string) { fired.Add(1) })
	for range 10 {
		d.touch("a")
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := fired.Load(); n != 0 {
		t.Fatalf("fired %d times inside the quiet window", n)
	}
	time.Sleep(150 * time.Millisecond)
	if n := fired.Load(); n != 1 {
		t.Fatalf("fired %d times for one burst, want 1", n)
	}
}

func TestDebounceMaxWait(t *testing.T) {
	var mu sync.Mutex
	var at []time.Duration
	start := time.Now()
	d := newDebouncer(100*time.Millisecond, 300*time.Millisecond, func(string) {
		mu.Lock()
		at = append(at, time.Since(start))
		mu.Unlock()
	})
	// Touch every 20 ms for 1 s: never quiet for 100 ms.
	for time.Since(start) < time.Second {
		d.touch("a")
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) < 2 || len(at) > 4 {
		t.Fatalf("fired at %v; want about every 300 ms while flapping", at)
	}
	for i, x := range at {
		if lo := time.Duration(i+1) * 300 * time.Millisecond; x < lo-20*time.Millisecond {
			t.Errorf("fire %d at %s, before the max wait %s", i, x, lo)
		}
	}
}

func TestDebounceKeysAreIndependentAndFlush(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	d := newDebouncer(time.Hour, time.Hour, func(k string) { mu.Lock(); got[k]++; mu.Unlock() })
	d.touch("a")
	d.touch("b")
	d.touch("a")
	if d.pending() != 2 {
		t.Fatalf("pending %d", d.pending())
	}
	d.flush()
	d.touch("c") // after flush: ignored (stopping)
	mu.Lock()
	defer mu.Unlock()
	if got["a"] != 1 || got["b"] != 1 || got["c"] != 0 || d.pending() != 0 {
		t.Errorf("fired %v", got)
	}
}

func TestDebounceZeroFiresAtOnce(t *testing.T) {
	n := 0
	d := newDebouncer(0, 0, func(string) { n++ })
	d.touch("a")
	d.touch("a")
	if n != 2 {
		t.Errorf("fired %d, want 2", n)
	}
}
