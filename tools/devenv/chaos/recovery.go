package chaos

import (
	"context"
	"sort"
	"strings"
	"time"
)

// recoveryLimit is how long a watcher waits for the statuses pending after a fault.
const recoveryLimit = 120 * time.Second

// watchRecovery measures how long after fault f ended every status that was pending
// then reached the stream: it compares what a replica's LIST says with the last event
// the recorder saw for each container; the ids that disagree when the fault ends are
// the pending ones, and the recovery ends when each has agreed at least once. (Changes
// made just before, still in their debounce, count too: a recovery is never shorter
// than the debounce when something changed.) The result is a history entry.
func (w *World) watchRecovery(ctx context.Context, f Entry) {
	var pending map[string]bool
	initial, lastID := 0, ""
	deadline := f.End.Add(recoveryLimit)
	for {
		if views, err := w.anyView(ctx); err == nil {
			bad := disagreeing(views, w.Rec.Last())
			if pending == nil {
				pending, initial = bad, len(bad)
			} else {
				for id := range pending {
					if !bad[id] {
						delete(pending, id)
						lastID = id
					}
				}
			}
			if len(pending) == 0 {
				// The last id to agree is what a slow recovery waited for.
				w.Hist.Add(Entry{Type: "recovery", Kind: f.Kind, Step: f.Step, Start: f.End, End: time.Now(), Count: initial, ID: lastID})
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			ids := make([]string, 0, len(pending))
			for id := range pending {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			w.Hist.Add(Entry{Type: "recovery", Kind: f.Kind, Step: f.Step, Start: f.End, End: time.Now(), Count: initial,
				Err: "statuses still undelivered: " + strings.Join(ids, ",")})
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// anyView is the LIST of the leader, or of any replica that answers.
func (w *World) anyView(ctx context.Context) (map[string]APIView, error) {
	order := []*Replica{w.Leader(), w.Replicas["a"], w.Replicas["b"]}
	var last error
	for _, r := range order {
		if r == nil || !r.Up() {
			continue
		}
		_, url := r.Current()
		v, err := w.listViews(ctx, url)
		if err == nil {
			return v, nil
		}
		last = err
	}
	if last == nil {
		last = context.Canceled
	}
	return nil, last
}

// disagreeing: the ids whose last event is not the status the API shows, and those the
// API no longer shows whose last event is not DELETED.
func disagreeing(views map[string]APIView, last map[string]Event) map[string]bool {
	bad := map[string]bool{}
	for id, v := range views {
		if e, ok := last[id]; !ok || e.Status != v.Status {
			bad[id] = true
		}
	}
	for id, e := range last {
		if _, ok := views[id]; !ok && e.Status != "DELETED" {
			bad[id] = true
		}
	}
	return bad
}
