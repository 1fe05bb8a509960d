package status

import (
	"context"
	"time"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Reconcile converges one container from what the caches show now: it plans, confirms
// a destructive plan at the apiserver, and carries the plan out. It returns when to look
// at the container again (0: on its next change); an error sends it back to the queue. Planning at
// send time (not at event time) is what makes an older state impossible to send after
// a newer one.
func (r *Reporter) Reconcile(ctx context.Context, id string) (time.Duration, error) {
	// The force is taken here, not cleared after the publish: a republish asked for
	// while this one is in flight sets it again and is not lost.
	snap := r.src.Snapshot(id)
	inc := incarnationOf(snap)
	incPrint := printOf(inc)
	r.mu.Lock()
	var last *delivered
	forced, knownLive := false, false
	if t := r.containers[id]; t != nil {
		// What was sent about an earlier container with this id does not count: a
		// container created and deleted while the cache was behind would otherwise get
		// no DELETED, its predecessor's being the last one sent.
		if !t.sent.none() && (inc == "" || t.sentFor == incPrint) {
			st := t.sent // a copy: used unlocked
			last = &st
			knownLive = inc != "" && t.sentTerm == r.term && st.status != v1alpha1.DELETED
		}
		forced, t.forced = t.forced, false
		r.release(id)
	}
	r.mu.Unlock()
	keepForce := func() {
		if forced {
			r.mu.Lock()
			r.entry(id).forced = true
			r.mu.Unlock()
		}
	}

	now := r.opts.Clock.Now()
	p := plan(snap, last, forced, now, r.opts.Settle)
	if needsConfirmation(p, snap.Record, knownLive) {
		// No destructive step on a cache alone: the plan is made again from the
		// apiserver's objects and carried out only if both agree. When they do not,
		// this replica's cache is behind (it could resend an old DELETED after the id
		// was created again).
		apiSnap, err := r.cl.Confirmed(ctx, id)
		if err != nil {
			keepForce()
			return 0, err
		}
		if !agree(p, plan(confirmedView(apiSnap, snap), last, forced, now, r.opts.Settle)) {
			keepForce()
			return 0, notYet{whyCacheBehind}
		}
	}
	if !p.Orphans.Empty() {
		if err := r.cl.DeleteOrphans(ctx, p.Orphans.Deployments, p.Orphans.Services); err != nil {
			keepForce()
			return 0, err
		}
		r.log.Info("status: deleted what no live record owns", "id", id,
			"deployments", len(p.Orphans.Deployments), "services", len(p.Orphans.Services))
	}
	if rec := p.DeleteRecord; rec != nil {
		if err := r.cl.DeleteRecord(ctx, *rec, snap.ServicesOf(string(rec.UID))); err != nil {
			keepForce()
			return 0, err
		}
	}
	stored := false
	if rep := p.Publish; rep != nil {
		ev := r.eventID(id, inc, *rep, now)
		rep.Observed = ev.observed
		var err error
		if stored, err = r.publish(ctx, ev.eventID, id, *rep); err != nil {
			keepForce()
			return 0, err
		}
		if detail := snap.Withheld(); detail != "" && snap.Status() == rep.Status {
			// What the status message leaves out for the tenant (the node's pull error,
			// a quota's usage) is the operator's, once per event.
			r.log.Info("status: detail kept out of the status message", "id", id, "status", rep.Status.Status, "detail", detail)
		}
	}
	if p.Finalize != nil && p.Publish != nil && !stored {
		// Only a stream's acknowledgement says DCM will read the DELETED; a plain
		// publish reached whoever was subscribed then, maybe nobody. The record keeps
		// the DELETED owed, the retries send it again (the same event id, so a consumer
		// that saw it skips it), until a stream stores one.
		keepForce()
		return 0, notYet{whyNotStored}
	}
	r.mu.Lock()
	if rep := p.Publish; rep != nil {
		r.scheduleResend(id, inc, incPrint, snap, rep.Status, now) // first: it looks at the status sent before
		t := r.entry(id)
		t.sent, t.sentFor, t.sentTerm = deliveredOf(*rep), incPrint, r.term
	}
	if t := r.containers[id]; t != nil {
		t.minted = nil // delivered, or nothing to send: the next status sent is a new change
		r.release(id)
	}
	r.mu.Unlock()
	if p.Finalize != nil {
		if err := r.cl.Finalize(ctx, *p.Finalize); err != nil {
			return 0, err
		}
	}
	return p.RecheckAfter, nil
}

// mintedEvent is the event minted for sending rep about one incarnation: its id and
// when it was observed (the report's timestamp).
type mintedEvent struct {
	inc      string
	rep      Report
	eventID  string
	observed time.Time
}

// eventID is the event for sending rep about container id (incarnation inc), planned at
// now: the one minted for the previous attempt when this is its retry (the same
// incarnation, status, message and outputs, nothing delivered and no republish asked
// for since), else a new one, observed now. So a retry after a lost acknowledgement is
// the same event, its id and its timestamp, de-duplicated by the stream (Nats-Msg-Id)
// and by DCM, while a real change, and a change back, is a new event.
// A republish (leadership gained, NATS reconnected, the periodic resync) is a new event
// with a new id on purpose: it is sent so that DCM learns the status again (the stream
// may not have existed, DCM may have dropped an event for an instance it had not stored
// yet), and with the old id JetStream would drop it as a duplicate of the one it
// stored within its duplicate window, or a consumer that keeps seen ids would skip it.
func (r *Reporter) eventID(id, inc string, rep Report, now time.Time) mintedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.entry(id)
	if m := t.minted; m != nil && m.inc == inc && m.rep.Same(rep) {
		return *m
	}
	t.minted = &mintedEvent{inc: inc, rep: rep, eventID: NewEventID(), observed: now}
	return *t.minted
}

func (r *Reporter) publish(ctx context.Context, eventID, id string, rep Report) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st := rep.Status
	stored, err := r.pub.Publish(ctx, eventID, id, rep)
	if err != nil {
		if r.opts.Failed != nil {
			r.opts.Failed()
		}
		return false, err
	}
	if r.opts.Published != nil {
		r.opts.Published(st)
	}
	r.log.Debug("status: published", "id", id, "status", st.Status, "message", st.Message, "event", eventID, "stored", stored)
	return stored, nil
}

// prune forgets ids that are gone from the cluster and whose DELETED was delivered.
// Until then their DELETED is remembered, so the deletion of their last pods does not
// send DELETED again.
func (r *Reporter) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eachTracked(func(id string, t *tracked) {
		if t.sent.status == v1alpha1.DELETED && r.src.Snapshot(id).Empty() {
			t.sent, t.sentFor = delivered{}, incarnationPrint{}
			r.forgetResend(id)
		}
	})
}

// incarnationOf is the container a snapshot is about: its record's UID; "" when it
// has no record.
func incarnationOf(snap container.Snapshot) string {
	if snap.Record != nil {
		return string(snap.Record.UID)
	}
	return ""
}
