package status

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Plan is what the reporter does for one container, decided from its snapshot alone.
// The reporter carries it out in this order: record, delete services, publish,
// delete the record; a failed step stops the rest and the whole container is planned again on
// the retry (every step is idempotent). A plan with a destructive step
// (NeedsConfirmation) is carried out only if the plan made from the apiserver's objects
// agrees (agree).
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
	// DeleteRecord is the record to delete once its DELETED has been delivered, stored
	// by a stream.
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

// NeedsConfirmation reports whether p takes a step that a cache alone must not decide:
// writing a record (restoring or relabelling one re-creates the id's reservation, and a
// create of the id then answers 409; marking one owed promises DCM a DELETED), deleting
// Services, publishing DELETED (DCM deletes the instance), or deleting a record (the id
// is free again). Each of those is irreversible or tells DCM something it acts on; a
// cache can be behind by as long as a broken watch takes to come back (client-go's
// reflector waits 30-60 s between attempts after an apiserver outage), and each of a
// replica's caches lags on its own. A plan that only publishes a live status is not
// confirmed: the next change or republish corrects it, and confirming every status
// would cost three apiserver requests per event.
func (p Plan) NeedsConfirmation() bool {
	return p.Record != nil || len(p.DeleteServices) > 0 || publishesDeleted(p) || p.DeleteRecord != nil
}

func publishesDeleted(p Plan) bool {
	return p.Publish != nil && p.Publish.Status == v1alpha1.DELETED
}

// agree reports whether the plan made from the caches (cached) and the one made from
// the apiserver's objects (confirmed) take the same destructive steps: the same record
// write, the same Services (by UID), both or neither publishing DELETED, and the same
// record deleted (by UID). The live status each would publish may differ (pods come
// from the cache in both) and so may RecheckAfter: neither destroys anything.
func agree(cached, confirmed Plan) bool {
	if (cached.Record == nil) != (confirmed.Record == nil) ||
		cached.Record != nil && *cached.Record != *confirmed.Record {
		return false
	}
	if !sameServices(cached.DeleteServices, confirmed.DeleteServices) {
		return false
	}
	if publishesDeleted(cached) != publishesDeleted(confirmed) {
		return false
	}
	if (cached.DeleteRecord == nil) != (confirmed.DeleteRecord == nil) ||
		cached.DeleteRecord != nil && cached.DeleteRecord.UID != confirmed.DeleteRecord.UID {
		return false
	}
	return true
}

// sameServices reports whether a and b are the same Services, by UID, in any order.
func sameServices(a, b []*container.Service) bool {
	if len(a) != len(b) {
		return false
	}
	uids := make(map[types.UID]int, len(a))
	for _, s := range a {
		uids[s.UID]++
	}
	for _, s := range b {
		if uids[s.UID] == 0 {
			return false
		}
		uids[s.UID]--
	}
	return true
}
