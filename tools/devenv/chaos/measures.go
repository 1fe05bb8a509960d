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
// was ready and its last one. Goroutines are compared in one role: from the first warm
// sample in the role the process ends in (the leader or not), when it held that role for
// minLife or more. A replica that becomes the leader starts the status controller (its
// workers, its loop), about 20 goroutines that are its new job, not a leak; with the
// reflectors a follower runs 35 to 55, so "1.25x + 30" of a follower's count did not
// cover them (seed 350101: a-7, 35 as a follower, 75 at rest as the leader).
func Growths(h []Entry) []Growth {
	ready := map[string]time.Time{}
	first, last := map[string]Entry{}, map[string]Entry{}
	var warm []Entry
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
		if !e.Start.Before(ready[e.Proc].Add(warmAfter)) {
			warm = append(warm, e)
			if _, ok := first[e.Proc]; !ok {
				first[e.Proc] = e
			}
		}
	}
	var out []Growth
	for _, p := range procs {
		f, ok := first[p]
		if !ok {
			continue
		}
		l := last[p]
		// The goroutines' baseline: the first warm sample in the final role, if the
		// process held that role long enough to judge; else the first warm one.
		g := f
		if i := slices.IndexFunc(warm, func(e Entry) bool { return e.Proc == p && e.Leader == l.Leader }); i >= 0 &&
			l.Start.Sub(warm[i].Start) >= minLife {
			g = warm[i]
		}
		out = append(out, Growth{Proc: p, Span: l.Start.Sub(f.Start), GoroutinesStart: g.Goroutines, GoroutinesEnd: l.Goroutines,
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
