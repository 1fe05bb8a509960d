package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// minFaultGap is the least time between the end of a window fault and the next.
const minFaultGap = 5 * time.Second

// Execute runs the plan against the world: every step at its offset from now, each
// operation in its own goroutine (so they overlap each other and the faults), window
// faults one after the other (the plan spaces them), proxy faults one after the other in
// a lane of their own, and after each fault a watcher that
// measures the recovery. It returns once every step has finished and every fault is
// healed; the recovery watchers go on (WaitRecoveries).
func (w *World) Execute(ctx context.Context, steps []Step) {
	start := time.Now()
	var ops sync.WaitGroup
	watchers := &w.watchers
	faults := make(chan Step, len(steps))
	proxied := make(chan Step, len(steps))
	faultsDone := make(chan struct{})
	lanes := sync.WaitGroup{}
	// Window faults one after the other; proxy faults the same, in a lane of their own.
	for _, lane := range []chan Step{faults, proxied} {
		lanes.Go(func() { w.faultLane(ctx, start, lane) })
	}
	go func() { lanes.Wait(); close(faultsDone) }()
	for _, s := range steps {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(s.At))):
		}
		if ctx.Err() != nil {
			break
		}
		switch s.Kind {
		case FaultPodDelete, FaultFate:
			ops.Go(func() {
				e := w.fault(ctx, s)
				watchers.Go(func() { w.watchRecovery(ctx, e) })
			})
		default:
			if slices.Contains(proxyFaults, s.Kind) {
				proxied <- s
				continue
			}
			if IsFault(s.Kind) {
				faults <- s
				continue
			}
			ops.Go(func() { w.operation(ctx, s) })
		}
	}
	close(faults)
	close(proxied)
	ops.Wait()
	<-faultsDone
}

// faultLane runs the faults of one lane in turn, each followed by its recovery watcher.
func (w *World) faultLane(ctx context.Context, start time.Time, lane <-chan Step) {
	var prevEnd time.Time
	for s := range lane {
		// A restart can take longer than planned (the apiserver needs seconds to be
		// ready): keep a few seconds between faults, so each recovery is measured on
		// its own and not folded into the next fault's.
		sleep(ctx, time.Until(prevEnd.Add(minFaultGap)))
		fmt.Fprintf(w.Log, "chaos: +%5.1fs fault %s %s\n", time.Since(start).Seconds(), s.Kind, strings.Join(s.Via, ""))
		e := w.fault(ctx, s)
		prevEnd = e.End
		w.watchers.Go(func() { w.watchRecovery(ctx, e) })
	}
}

// WaitRecoveries waits until every recovery watcher has recorded its result.
func (w *World) WaitRecoveries() { w.watchers.Wait() }

// operation runs one operation step; races send their requests at the same moment.
func (w *World) operation(ctx context.Context, s Step) {
	switch s.Kind {
	case OpCreate:
		w.create(ctx, s, s.Via[0])
	case OpCreateRace:
		var wg sync.WaitGroup
		for _, via := range s.Via {
			wg.Go(func() { w.create(ctx, s, via) })
		}
		wg.Wait()
	case OpCreateDelete:
		var wg sync.WaitGroup
		wg.Go(func() { w.create(ctx, s, s.Via[0]) })
		wg.Go(func() { w.delete(ctx, s, s.Via[1]) })
		wg.Wait()
	case OpCreateCleanup, OpDeleteRace:
		w.createCleanup(ctx, s)
	case OpForeign:
		w.foreign(ctx, s)
		w.observeForeign(ctx)
	case OpDelete:
		w.delete(ctx, s, s.Via[0])
	case OpHandDelete:
		w.handDelete(ctx, s)
	case OpGet:
		w.get(ctx, s, s.Via[0])
	case OpList:
		w.list(ctx, s, s.Via[0])
	}
}

// SampleMetrics records every running replica's goroutines, memory, leadership and
// pending statuses every period until ctx ends.
func (w *World) SampleMetrics(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		w.sample("sample")
		w.observeForeign(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *World) sample(note string) {
	for _, name := range []string{"a", "b"} {
		r := w.Replicas[name]
		s := r.Service()
		if s == nil || !r.Up() {
			continue
		}
		proc, _ := r.Current()
		m, err := s.Metrics()
		if err != nil {
			continue
		}
		w.Hist.Add(Entry{Type: "metrics", Via: name, Proc: proc, Start: time.Now(), Note: note,
			Goroutines: m["go_goroutines"], RSS: m["process_resident_memory_bytes"],
			Leader: m["sp_leader"], Pending: m["sp_status_events_pending"]})
	}
}
