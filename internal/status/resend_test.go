package status

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

const resendAfter = 15 * time.Second

// Issue 23 item 7: DCM drops the events of an instance it has not stored yet. A new
// container's current status is sent once more, as a new event, resendAfter after its
// first status was delivered; once only, and not for a container that is gone or old.
func TestControllerResendsANewContainersStatus(t *testing.T) {
	oldDep := func(name string) *container.Deployment {
		return dep(name, func(d *appsv1.Deployment) { d.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour)) })
	}
	for _, tc := range []struct {
		name string
		// steps: snapshots the cache shows in turn, each after the previous one's
		// journal entries (want[i]) are in.
		steps []container.Snapshot
		want  [][]string
		// resent: what the resend sends, resendAfter after the first delivery (none: nil).
		resent []string
		off    bool
	}{
		{"a new container: its status again, once",
			[]container.Snapshot{liveSnap("a-1")}, [][]string{{"publish a PENDING"}}, []string{"publish a PENDING"}, false},
		{"changed meanwhile: the current status",
			[]container.Snapshot{liveSnap("a-1"), {Record: record(), Deployments: deps(dep("a-1")), Pods: pods(runningPod())}},
			[][]string{{"publish a PENDING"}, {"publish a RUNNING"}}, []string{"publish a RUNNING"}, false},
		{"deleted meanwhile: nothing more",
			[]container.Snapshot{liveSnap("a-1"), deletedSnap()},
			[][]string{{"publish a PENDING"}, {"publish a DELETED", "finalize r1"}}, nil, false},
		{"an old container (a new leader's first status of it): not resent",
			[]container.Snapshot{{Record: record(), Deployments: deps(oldDep("a-1"))}}, [][]string{{"publish a PENDING"}}, nil, false},
		{"turned off (0): not resent",
			[]container.Snapshot{liveSnap("a-1")}, [][]string{{"publish a PENDING"}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startControllerWith(t, 0, 0, func(o *Options) {
				if !tc.off {
					o.ResendAfter = resendAfter
				}
			})
			var want []string
			for i, snap := range tc.steps {
				r.src.set("a", snap)
				want = append(want, tc.want[i]...)
				r.out.waitFor(t, want...)
				waitPending(t, r, 0) // done: a resend is scheduled by now
			}
			r.clock.Step(resendAfter - time.Millisecond)
			r.out.waitFor(t, want...)
			r.clock.Step(time.Millisecond)
			want = append(want, tc.resent...)
			r.out.waitFor(t, want...)
			waitPending(t, r, 0)
			// Once: nothing more, however long.
			r.clock.Step(10 * resendAfter)
			waitPending(t, r, 0)
			r.out.waitFor(t, want...)
			if ev := r.out.eventIDs(); len(tc.resent) > 0 && ev[len(ev)-1] == ev[len(ev)-2] {
				t.Errorf("event ids %q: the resend reused the last event's id", ev)
			}
			if n := pendingResends(r.rep); n != 0 {
				t.Errorf("%d resends pending, want none", n)
			}
		})
	}
}

// A resend pending when the controller stops (leadership lost) is dropped with it.
func TestControllerDropsResendsWhenItStops(t *testing.T) {
	r := startControllerWith(t, 0, 0, func(o *Options) { o.ResendAfter = resendAfter })
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish a PENDING")
	waitPending(t, r, 0)
	if n := pendingResends(r.rep); n != 1 {
		t.Fatalf("%d resends pending, want 1", n)
	}
	close(r.drain)
	for done := false; !done; {
		select {
		case <-r.done:
			done = true
		case <-time.After(time.Millisecond):
			r.clock.Step(10 * time.Millisecond)
		}
	}
	if n := pendingResends(r.rep); n != 0 {
		t.Errorf("%d resends pending after the controller stopped", n)
	}
	r.clock.Step(resendAfter)
	if p := r.rep.Pending(); p != 0 {
		t.Errorf("pending %d on a stopped controller", p)
	}
}

// pendingResends counts the resends rep has pending.
func pendingResends(rep *Controller) int {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	n := 0
	for _, t := range rep.containers {
		if t.resend != nil {
			n++
		}
	}
	return n
}

// waitPending waits (real time, bounded) until the controller owes n containers.
func waitPending(t *testing.T, r *rig, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.rep.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("pending %d, want %d", r.rep.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
