package status

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// A new container's status is resent once, Options.ResendAfter after its first delivery,
// under a new event id: DCM skips events of an instance its slow commit has not stored yet.
// At most one resend is pending per id, dropped with its DELETED, its entry, or the controller.

// resend is one pending resend: its timer, on the controller's clock.
type resend struct {
	timer clock.Timer
}

// scheduleResend arranges a resend after st, just delivered for id (incarnation inc, print
// incPrint, as snap showed at now), if st is that incarnation's first status and the
// container is younger than ResendAfter; else a new leader's start-up republish would send
// every status twice. A DELETED drops a pending resend. r.mu is held.
func (r *Controller) scheduleResend(id, inc string, incPrint incarnationPrint, snap container.Snapshot, st container.Status, now time.Time) {
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

// fireResend queues id's current status to be sent again as a new event, unless dropped.
func (r *Controller) fireResend(id string, rs *resend) {
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
func (r *Controller) forgetResend(id string) {
	if t := r.containers[id]; t != nil && t.resend != nil {
		t.resend.timer.Stop()
		t.resend = nil
		r.release(id)
	}
}

// stopResends drops every pending resend as the controller stops; the next leader republishes.
func (r *Controller) stopResends() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eachTracked(func(id string, _ *tracked) { r.forgetResend(id) })
}
