package status

import (
	"time"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Plan is what the reporter does for one container, decided from its snapshot alone.
// The reporter carries it out in this order: record, delete services, publish,
// delete the record; a failed step stops the rest and the whole container is planned again on
// the retry (every step is idempotent).
type Plan struct {
	// Record is the record to write first: restored for a live container that has
	// none (deleted by hand), or marked DELETED owed for a container that is gone, so
	// the DELETED survives a failed publish, a restart and a NATS outage.
	Record *RecordWrite
	// DeleteServices are Services left by a container that is gone (deleted with
	// kubectl, or while the provider was stopped).
	DeleteServices []*container.Service
	// Publish is the status to deliver; nil when DCM already has it.
	Publish *container.Status
	// DeleteRecord is the record to delete once its DELETED has been delivered (the
	// reporter first confirms with the apiserver that the container is gone).
	DeleteRecord *container.Record
	// RecheckAfter asks for the container to be planned again after this long: a
	// record without a Deployment may be a create still in progress.
	RecheckAfter time.Duration
}

// RecordWrite is a record as it should be.
type RecordWrite struct {
	Incarnation string
	Owed        bool
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool {
	return p.Record == nil && len(p.DeleteServices) == 0 && p.Publish == nil &&
		p.DeleteRecord == nil && p.RecheckAfter == 0
}

// plan decides what to do for a container: snap is what the caches show now, last the
// status DCM was last given (nil: none, as far as this reporter knows), forced asks for
// the status to be sent even if unchanged (republish after sync, reconnect, resync).
// A record without a live Deployment is a container that is gone once DELETED is owed
// on it, the container was reported live, or the record is older than settle (no create
// takes that long); before that it may be a create in progress. (So after a restart, a
// container created and deleted by hand within settle is reported DELETED when its
// record is settle old: late, never lost. Marking the record on every create would
// cost each create one more write.)
func plan(snap container.Snapshot, last *container.Status, forced bool, now time.Time, settle time.Duration) Plan {
	var p Plan
	rec := snap.Record
	if live := snap.Live(); live != nil {
		inc := live.Incarnation
		// A record marked owed while its Deployment lives is a DELETE in progress
		// (or one that failed half-way): left alone.
		if rec == nil || !rec.Owed && (rec.Terminating || rec.Incarnation != inc) {
			p.Record = &RecordWrite{Incarnation: inc}
		}
		p.Publish = changed(snap.Status(), last, forced)
		return p
	}

	wasLive := last != nil && last.Status != v1alpha1.DELETED
	if rec == nil {
		// No record and no live Deployment: a container deleted after its record was
		// deleted by hand.
		p.DeleteServices = snap.Services
		if wasLive {
			p.Publish = changed(snap.Status(), last, forced)
		}
		return p
	}
	age := now.Sub(rec.Created)
	if !rec.Owed && !wasLive && len(snap.Deployments) == 0 && age < settle {
		p.RecheckAfter = settle - age
		return p
	}
	if !rec.Owed {
		p.Record = &RecordWrite{Incarnation: rec.Incarnation, Owed: true}
	}
	p.DeleteServices = snap.Services
	p.Publish = changed(snap.Status(), last, forced)
	p.DeleteRecord = rec
	return p
}

// changed is st when DCM does not have it yet (or it is forced), else nil.
func changed(st container.Status, last *container.Status, forced bool) *container.Status {
	if forced || last == nil || *last != st {
		return &st
	}
	return nil
}
