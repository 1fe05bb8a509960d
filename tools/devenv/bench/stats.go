package bench

import (
	"slices"
	"time"
)

// Dist summarizes latency samples.
type Dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	// Lost: samples whose outcome never came, counted at the time given up after.
	Lost int `json:"lost,omitempty"`
}

func summarize(samples []time.Duration) Dist {
	if len(samples) == 0 {
		return Dist{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	q := func(p float64) time.Duration {
		i := int(p*float64(len(s)-1) + 0.5)
		return s[min(i, len(s)-1)]
	}
	return Dist{N: len(s), P50: ms(q(0.50)), P99: ms(q(0.99)), Max: ms(s[len(s)-1])}
}
