package status

import (
	"context"
	"time"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Reconcile converges one container from the caches: it plans, confirms a destructive plan
// at the apiserver, and carries it out. It returns when to look again (0: on its next change).
// Planning at send time, not event time, means an older state is never sent after a newer.
func (r *Controller) Reconcile(ctx context.Context, id string) (time.Duration, error) {
	// A cache whose watch is down can show a deleted container live: nothing is sent from
	// it, as a read from it answers 503. Its relist tells every id again.
	if len(r.src.Behind()) > 0 {
		return 0, notYet{whyCacheStale}
	}
	// The force is taken now, not cleared after publishing, so a republish asked meanwhile stays.
	snap := r.src.Snapshot(id)
	inc := incarnationOf(snap)
	incPrint := printOf(inc)
	r.mu.Lock()
	var last *delivered
	forced, knownLive := false, false
	if t := r.containers[id]; t != nil {
		// What was sent about an earlier container with this id does not count, or one created
		// and deleted while the cache lagged would get no DELETED.
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
		// No destructive step on a cache alone: replan from the apiserver's objects and go on
		// only if both agree; else this cache is behind (and could resend an old DELETED).
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
	p.RecheckAfter = r.imageStep(ctx, id, p)
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
			// What the status message withholds from the tenant is logged for the operator.
			r.log.Info("status: detail kept out of the status message", "id", id, "status", rep.Status.Status, "detail", detail)
		}
	}
	if p.Finalize != nil && p.Publish != nil && !stored {
		// Only a stream's ack says DCM will read the DELETED. Until one stores it, the record
		// keeps it owed and retries resend it under the same event id.
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

// mintedEvent is the event minted to send rep about one incarnation: its id and observed time.
type mintedEvent struct {
	inc      string
	rep      Report
	eventID  string
	observed time.Time
}

// eventID is the event sending rep about container id (incarnation inc) at now. A retry of
// the same incarnation and report, with nothing delivered or republished since, reuses the
// previous event, so the stream (Nats-Msg-Id) and DCM de-duplicate it; a real change, even
// a change back, is a new event. A republish gets a new id on purpose, so DCM learns the
// status again instead of dropping it as a duplicate.
func (r *Controller) eventID(id, inc string, rep Report, now time.Time) mintedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.entry(id)
	if m := t.minted; m != nil && m.inc == inc && m.rep.Same(rep) {
		return *m
	}
	t.minted = &mintedEvent{inc: inc, rep: rep, eventID: NewEventID(), observed: now}
	return *t.minted
}

func (r *Controller) publish(ctx context.Context, eventID, id string, rep Report) (bool, error) {
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

// prune forgets ids gone from the cluster whose DELETED was delivered; until then the
// remembered DELETED keeps their last pods' deletion from sending another.
func (r *Controller) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eachTracked(func(id string, t *tracked) {
		if t.sent.status == v1alpha1.DELETED && r.src.Snapshot(id).Empty() {
			t.sent, t.sentFor = delivered{}, incarnationPrint{}
			r.forgetResend(id)
		}
	})
}

// incarnationOf is the snapshot's container: its record's UID, or "" without a record.
func incarnationOf(snap container.Snapshot) string {
	if snap.Record != nil {
		return string(snap.Record.UID)
	}
	return ""
}
