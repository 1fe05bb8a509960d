package status

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// A new container's status is sent once more, Options.ResendAfter after its first one
// was delivered. DCM's consumer acknowledges and skips the events of an instance it has
// not stored yet (the registry release we test with and DCM's control plane alike), and
// DCM stores an instance only once the create answered and its own commit is done, so a
// slow commit loses the first statuses until the next resync. The resend is a republish
// of one container: its current status, as
// a new event (a new event id, so neither JetStream's de-duplication nor DCM drops it).
//
// Bounded: at most one pending resend per id (a timer, in the id's tracked entry),
// dropped when the id's DELETED is delivered, when the id is pruned, and when the
// reporter stops.

// resend is one pending resend: its timer, on the reporter's clock.
type resend struct {
	timer clock.Timer
}

// scheduleResend arranges the resend after st, just delivered for container id
// (incarnation inc, whose print is incPrint, as snap showed it at now), when st is the first status delivered for
// that incarnation and the container is young: created less than ResendAfter ago. (An
// older container is one DCM has stored long since; without that bound a new leader,
// whose first delivery of every container is its start-up republish, would send every
// status twice.) A DELETED drops a pending resend. r.mu is held.
func (r *Reporter) scheduleResend(id, inc string, incPrint incarnationPrint, snap container.Snapshot, st container.Status, now time.Time) {
	d := r.opts.ResendAfter
	if st.Status == v1alpha1.DELETED {
		r.forgetResend(id)
		return
	}
	if d <= 0 {
		return
	}
	if t := r.containers[id]; t != nil && !t.sent.none() && t.sentFor == incPrint {
		return // not the incarnation's first status
	}
	live := snap.Live()
	if live == nil || live.Incarnation != inc || now.Sub(live.Created) >= d {
		return
	}
	r.forgetResend(id) // an earlier incarnation's, if any
	rs := &resend{}
	// In its own goroutine: a fake clock runs the callback with its lock held, and
	// fireResend takes r.mu, under which this very call takes the clock's lock.
	rs.timer = r.opts.Clock.AfterFunc(d, func() { go r.fireResend(id, rs) })
	r.entry(id).resend = rs
}

// fireResend queues container id's current status to be sent again as a new event,
// unless the resend was dropped meanwhile.
func (r *Reporter) fireResend(id string, rs *resend) {
	r.mu.Lock()
	t := r.containers[id]
	if t == nil || t.resend != rs {
		r.mu.Unlock()
		return
	}
	queue := r.queue
	// No release: the force keeps the entry.
	t.resend = nil
	t.forced = true
	t.minted = nil // a new event: see eventID
	r.mu.Unlock()
	r.undelivered.add(id)
	queue.Add(id)
}

// forgetResend drops id's pending resend. r.mu is held.
func (r *Reporter) forgetResend(id string) {
	if t := r.containers[id]; t != nil && t.resend != nil {
		t.resend.timer.Stop()
		t.resend = nil
		r.release(id)
	}
}

// stopResends drops every pending resend: the reporter stops (the next leader republishes
// every status anyway).
func (r *Reporter) stopResends() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eachTracked(func(id string, _ *tracked) { r.forgetResend(id) })
}
