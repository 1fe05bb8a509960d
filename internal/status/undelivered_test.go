package status

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// What sp_status_events_pending reads during a NATS outage: every container whose status
// failed to go out is owed while it waits for its retry (the work queue then looks
// empty: the ids sit in its rate limiter), and nothing once the retries are delivered.
func TestPendingCountsDeliveriesWaitingToRetry(t *testing.T) {
	r := startController(t, 0, 3)
	for _, id := range []string{"a", "b", "c"} {
		r.src.set(id, liveSnap(id+"-1"))
	}
	r.out.waitFor(t, "publish failed a", "publish failed b", "publish failed c")
	if n := r.rep.Pending(); n != 3 {
		t.Fatalf("pending %d during the outage, want 3 (each container's status is owed)", n)
	}
	// NATS is back: the retries go out on the backoff clock, in any order.
	deadline := time.After(10 * time.Second)
	for {
		r.out.mu.Lock()
		sent := 0
		for _, e := range r.out.entries {
			if strings.HasSuffix(e, " PENDING") {
				sent++
			}
		}
		r.out.mu.Unlock()
		if sent == 3 && r.rep.Pending() == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%d delivered, pending %d, want 3 and 0", sent, r.rep.Pending())
		case <-time.After(time.Millisecond):
			r.clock.Step(10 * time.Millisecond)
		}
	}
}

func TestUndelivered(t *testing.T) {
	type step struct {
		op, id string // add, take, done, failed, reset
	}
	cases := []struct {
		name  string
		steps []step
		want  []string // owed ids after the steps
	}{
		{"a change is owed", []step{{"add", "a"}}, []string{"a"}},
		{"delivered", []step{{"add", "a"}, {"take", "a"}, {"done", "a"}}, nil},
		{"a failed delivery stays owed", []step{{"add", "a"}, {"take", "a"}, {"failed", "a"}}, []string{"a"}},
		{"then its retry delivers", []step{{"add", "a"}, {"take", "a"}, {"failed", "a"}, {"take", "a"}, {"done", "a"}}, nil},
		{"a change during the delivery is still owed", []step{{"add", "a"}, {"take", "a"}, {"add", "a"}, {"done", "a"}}, []string{"a"}},
		{"...until its own delivery", []step{{"add", "a"}, {"take", "a"}, {"add", "a"}, {"done", "a"}, {"take", "a"}, {"done", "a"}}, nil},
		{"a second look that delivers owed nothing", []step{{"take", "a"}, {"done", "a"}}, nil},
		{"a second look that fails is owed", []step{{"take", "a"}, {"failed", "a"}}, []string{"a"}},
		{"one id delivered, another not", []step{{"add", "a"}, {"add", "b"}, {"take", "a"}, {"done", "a"}}, []string{"b"}},
		{"many changes, one container", []step{{"add", "a"}, {"add", "a"}, {"add", "a"}}, []string{"a"}},
		{"no longer reporting", []step{{"add", "a"}, {"take", "b"}, {"failed", "b"}, {"reset", ""}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var u undelivered
			for _, s := range tc.steps {
				switch s.op {
				case "add":
					u.add(s.id)
				case "take":
					u.take(s.id)
				case "done":
					u.done(s.id)
				case "failed":
					u.failed(s.id)
				case "reset":
					u.reset()
				}
			}
			var got []string
			for id := range u.gen {
				got = append(got, id)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || u.count() != len(tc.want) {
				t.Errorf("owed %q (count %d), want %q", got, u.count(), tc.want)
			}
		})
	}
}
