package chaos

import (
	"math"
	"slices"
	"strings"
	"time"
)

// What the run measured rather than judged: each service process's goroutines and
// memory over its life, and the recovery times after faults (pure, from the history).

// Growth is one process's goroutines and memory, warm and at the end.
type Growth struct {
	Proc            string        `json:"proc"`
	Span            time.Duration `json:"span"`
	GoroutinesStart float64       `json:"goroutines_start"`
	GoroutinesEnd   float64       `json:"goroutines_end"`
	RSSStart        float64       `json:"-"`
	RSSEnd          float64       `json:"-"`
	RSSStartMiB     float64       `json:"rss_mib_start"`
	RSSEndMiB       float64       `json:"rss_mib_end"`
	Judged          bool          `json:"judged"`
}

// Growths reads the metrics samples: per process, its first sample warmAfter after it
// was ready and its last one.
func Growths(h []Entry) []Growth {
	ready := map[string]time.Time{}
	first, last := map[string]Entry{}, map[string]Entry{}
	var procs []string
	for _, e := range h {
		if e.Type == "proc" && e.Kind == "ready" {
			ready[e.Proc] = e.End
		}
	}
	for _, e := range h {
		if e.Type != "metrics" {
			continue
		}
		if _, ok := last[e.Proc]; !ok {
			procs = append(procs, e.Proc)
		}
		last[e.Proc] = e
		if _, ok := first[e.Proc]; !ok && !e.Start.Before(ready[e.Proc].Add(warmAfter)) {
			first[e.Proc] = e
		}
	}
	var out []Growth
	for _, p := range procs {
		f, ok := first[p]
		if !ok {
			continue
		}
		l := last[p]
		out = append(out, Growth{Proc: p, Span: l.Start.Sub(f.Start), GoroutinesStart: f.Goroutines, GoroutinesEnd: l.Goroutines,
			RSSStart: f.RSS, RSSEnd: l.RSS, RSSStartMiB: f.RSS / (1 << 20), RSSEndMiB: l.RSS / (1 << 20),
			Judged: l.Start.Sub(f.Start) >= minLife})
	}
	return out
}

// Recovery is the distribution of recovery times, overall and per fault kind.
type Recovery struct {
	Kind  string        `json:"kind"`
	N     int           `json:"n"`
	P50   time.Duration `json:"p50"`
	P99   time.Duration `json:"p99"`
	Max   time.Duration `json:"max"`
	Never int           `json:"never"`
}

// Recoveries reads the recovery entries.
func Recoveries(h []Entry) []Recovery {
	by := map[string][]time.Duration{}
	never := map[string]int{}
	for _, e := range h {
		if e.Type != "recovery" {
			continue
		}
		for _, k := range []string{"all", e.Kind} {
			if e.Err != "" {
				never[k]++
			} else {
				by[k] = append(by[k], e.End.Sub(e.Start))
			}
		}
	}
	keys := map[string]bool{}
	for k := range by {
		keys[k] = true
	}
	for k := range never {
		keys[k] = true
	}
	var out []Recovery
	for _, k := range sortedKeys(keys) {
		ds := by[k]
		slices.Sort(ds)
		r := Recovery{Kind: k, N: len(ds), Never: never[k]}
		if len(ds) > 0 {
			r.P50, r.P99, r.Max = quantile(ds, 0.5), quantile(ds, 0.99), ds[len(ds)-1]
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b Recovery) int {
		if a.Kind == "all" {
			return -1
		}
		if b.Kind == "all" {
			return 1
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return out
}

// quantile of sorted ds, nearest rank.
func quantile(ds []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
