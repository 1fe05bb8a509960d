package bench

import (
	"testing"
	"time"
)

func TestBusiest(t *testing.T) {
	for _, c := range []struct {
		name   string
		counts map[string]int
		want   string
	}{
		{"none", nil, ""},
		{"one", map[string]int{"a": 1}, "a"},
		{"most", map[string]int{"kwok-node-0": 2402, "kwok-node-1": 3000, "kwok-node-2": 2999}, "kwok-node-1"},
		{"a tie: first by name", map[string]int{"b": 5, "a": 5, "c": 4}, "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := busiest(c.counts); got != c.want {
				t.Errorf("busiest(%v) = %q, want %q", c.counts, got, c.want)
			}
		})
	}
}

func TestPerContainer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name           string
		written, event map[string]time.Time
		want           Dist
	}{
		{"nothing", nil, nil, Dist{}},
		{"each from its own write", map[string]time.Time{"a": at(0), "b": at(1000)}, map[string]time.Time{"a": at(600), "b": at(1500)},
			Dist{N: 2, P50: 600, P99: 600, Max: 600}},
		{"an event before the write's answer counts 0", map[string]time.Time{"a": at(100)}, map[string]time.Time{"a": at(90)},
			Dist{N: 1}},
		{"a lost container has no sample", map[string]time.Time{"a": at(0), "b": at(0)}, map[string]time.Time{"a": at(700)},
			Dist{N: 1, P50: 700, P99: 700, Max: 700}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := perContainer(c.written, c.event); got != c.want {
				t.Errorf("perContainer = %+v, want %+v", got, c.want)
			}
		})
	}
}
