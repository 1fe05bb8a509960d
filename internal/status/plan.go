package status

import (
	"crypto/sha256"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Plan is what the reporter does for one container, decided from its snapshot alone.
// The reporter carries it out in this order: delete the orphans, delete the record,
// publish, finalize the record; a failed step stops the rest and the whole container
// is planned again on the retry (every step is idempotent). A plan with a destructive step
// (NeedsConfirmation) is carried out only if the plan made from the apiserver's objects
// agrees (agree).
type Plan struct {
	// Orphans are the id's Deployments and Services that no live record owns: a deleted
	// record's, an earlier incarnation's, or those of a record that is gone. Each is
	// deleted by UID, NATS or not: the garbage collector keeps them while their deleted
	// record waits for its DELETED, and a DELETED waits for them to go.
	Orphans Orphans
	// DeleteRecord is the record of a container that is gone or was never made: a live
	// record no live Deployment joined (its Deployment deleted by hand, or its creator
	// died before making it). Deleting it makes the container deleted, as a DELETE does:
	// the garbage collector deletes what it owns, and the next plan publishes DELETED.
	DeleteRecord *container.Record
	// Publish is the report to deliver; nil when DCM already has it.
	Publish *Report
	// Finalize is the deleted record whose finalizer comes off once its DELETED has
	// been delivered, stored by a stream: then the apiserver lets it go.
	Finalize *container.Record
	// RecheckAfter asks for the container to be planned again after this long: a
	// record without a Deployment may be a create still in progress.
	RecheckAfter time.Duration
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool {
	return p.Orphans.Empty() && p.DeleteRecord == nil && p.Publish == nil && p.Finalize == nil && p.RecheckAfter == 0
}

// plan decides what to do for a container: snap is what the caches show now, last the
// report DCM was last given about this incarnation (nil: none, as far as this reporter
// knows), forced asks for the report to be sent even if unchanged (republish after
// sync, reconnect, resync).
//
//   - Orphans, whatever else holds: deleted.
//   - A live container (a live record and the Deployment it controls): its status.
//   - A terminating record still owing its DELETED: once no orphan is left, DELETED,
//     then Finalize.
//   - A live record with no live Deployment is a create in progress until it is settle
//     old (no create takes that long) or the container was reported live; after that it
//     is gone: DeleteRecord.
//   - No record: nothing is ours; once no orphan is left, DELETED when this reporter
//     told DCM the container lived (a record stripped of its finalizer by hand).
func plan(snap container.Snapshot, last *delivered, forced bool, now time.Time, settle time.Duration) Plan {
	p := Plan{Orphans: orphansOf(snap)}
	rec := snap.Record
	wasLive := last != nil && last.status != v1alpha1.DELETED
	switch {
	case snap.Live() != nil:
		p.Publish = changed(reportOf(snap), last, forced)
	case !p.Orphans.Empty() && (rec == nil || rec.Terminating):
		// DELETED once they are gone: their deletion brings the id back.
	case rec == nil:
		if wasLive {
			p.Publish = changed(reportOf(snap), last, forced)
		}
	case rec.Terminating:
		if rec.Owed {
			p.Publish = changed(reportOf(snap), last, forced)
			p.Finalize = rec
		}
	case !wasLive && now.Sub(rec.Created) < settle:
		p.RecheckAfter = settle - now.Sub(rec.Created)
	default:
		p.DeleteRecord = rec
	}
	return p
}

// Orphans are Deployments and Services no live record owns.
type Orphans struct {
	Deployments []*container.Deployment
	Services    []*container.Service
}

// Empty reports whether there are none.
func (o Orphans) Empty() bool { return len(o.Deployments) == 0 && len(o.Services) == 0 }

// orphansOf finds the snapshot's orphans: objects owned by a record (an incarnation)
// other than the live record, not already being deleted. A Deployment or Service has an
// incarnation only through its controller reference to a record; one with none is
// someone else's (or released) and never touched.
func orphansOf(snap container.Snapshot) Orphans {
	live := ""
	if r := snap.Record; r != nil && !r.Terminating {
		live = string(r.UID)
	}
	orphan := func(m container.Meta) bool { return m.Incarnation != "" && m.Incarnation != live && !m.Deleting }
	var o Orphans
	for _, d := range snap.Deployments {
		if orphan(d.Meta) {
			o.Deployments = append(o.Deployments, d)
		}
	}
	for _, v := range snap.Services {
		if orphan(v.Meta) {
			o.Services = append(o.Services, v)
		}
	}
	return o
}

// changed is rep when DCM does not have it yet (or it is forced), else nil.
func changed(rep Report, last *delivered, forced bool) *Report {
	if forced || last == nil || last.print != rep.print() {
		return &rep
	}
	return nil
}

// delivered is what the reporter keeps of the last report it delivered about a
// container: its status and its print, not the report itself (at 100,000 containers
// the reports were 30 MB of the heap: make model). The zero delivered is none.
type delivered struct {
	status v1alpha1.ContainerStatus
	print  reportPrint
}

func deliveredOf(r Report) delivered { return delivered{status: r.Status.Status, print: r.print()} }

// none: nothing was delivered.
func (d delivered) none() bool { return d.status == "" }

// reportPrint is a report's fingerprint: the first 16 bytes of the SHA-256 of what it
// tells DCM (its status, message and outputs), as JSON. Two reports with one print tell
// DCM the same, but for a chance of 2^-128; two that tell the same have one print
// (their outputs are built in one order from the same objects: container.OutputsOf),
// and a difference Same overlooks (an empty list for none) only sends an event more.
type reportPrint [16]byte

func (r Report) print() reportPrint {
	b, err := json.Marshal(struct {
		Status  container.Status
		Outputs container.Outputs
	}{r.Status, r.Outputs})
	if err != nil {
		return reportPrint{} // cannot happen (plain strings and numbers); never a match
	}
	h := sha256.Sum256(b)
	return reportPrint(h[:16])
}

// Report is what one status event tells DCM about a container.
type Report struct {
	// Status is the container's status and its message (container.StatusOf).
	Status container.Status
	// Outputs are its addresses and ports (output_spec), when it is RUNNING: DCM binds
	// a container's outputs when it reports RUNNING (its placement hands the event's
	// output_spec on, and binds a dependent resource to the stored outputs of RUNNING
	// resources). The zero Outputs, sent as none, for every other status: DCM keeps the
	// outputs it stored (a status event without output_spec leaves them as they are).
	Outputs container.Outputs
	// Observed is when the reporter first planned this report: the event's time and
	// its data's timestamp. Set with the event id (Reporter.eventID), kept through the
	// retries of one event; not part of what Same compares.
	Observed time.Time
}

// Same reports whether r and o tell DCM the same: the status, its message and the
// outputs. A change of outputs alone (a new pod IP while RUNNING, the load balancer's
// address assigned after RUNNING) is a change: it is sent, so that what DCM stored and
// binds dependents to is the container's current address. The outputs change only with
// the objects they are read from (the speaking pod's IP, the Service), so they add no
// events but those.
func (r Report) Same(o Report) bool { return r.Status == o.Status && r.Outputs.Equal(o.Outputs) }

// reportOf is the report of the container the snapshot shows: its status and, when it
// is RUNNING, its outputs.
func reportOf(snap container.Snapshot) Report {
	o, _ := snap.Observed()
	rep := Report{Status: container.StatusOf(o.Deployment, o.Pods)}
	if rep.Status.Status == v1alpha1.RUNNING {
		rep.Outputs = container.OutputsOf(o)
	}
	return rep
}

// NeedsConfirmation reports whether p takes a step that a cache alone must not decide:
// deleting a record (the container is gone for good) or publishing DELETED (DCM deletes
// the instance). A cache can be behind by as long as a broken watch takes to come back
// (client-go's reflector waits 30-60 s between attempts after an apiserver outage),
// and each of a replica's caches lags on its own: a cache that still shows a record
// whose DELETED was delivered and finalized would send it again after the id's next
// container was created. Finalize needs no confirmation of its own: it follows a
// confirmed DELETED and is guarded by the record's UID. A plan that only publishes a
// live status is not confirmed: the next change or republish corrects it.
func (p Plan) NeedsConfirmation() bool {
	return !p.Orphans.Empty() || p.DeleteRecord != nil || publishesDeleted(p)
}

// needsConfirmation is p.NeedsConfirmation but for what this reporter saw itself: the
// DELETED (and the finalize) of a deleted record whose container it reported live, in
// this leadership (knownLive). A deletion timestamp never goes back, and the record's
// finalizer, which only the leader takes off, has been on since: so the record the
// cache shows is the one it reported, deleted, not an earlier incarnation's a stale
// cache still holds after its successor was made (what the confirmation guards
// against). That spares the DELETED of every DELETE a read
// at the apiserver; after a restart or a new leadership (knownLive false) it is
// confirmed as before.
//
// Orphans of the cached record need none when that record is being deleted, for the same
// reason: its dependents are orphans for good.
func needsConfirmation(p Plan, rec *container.Record, knownLive bool) bool {
	if rec != nil && rec.Terminating && p.DeleteRecord == nil && onlyOf(p.Orphans, string(rec.UID)) &&
		(p.Finalize == nil || knownLive && p.Finalize.UID == rec.UID) {
		return false
	}
	return p.NeedsConfirmation()
}

// each calls fn with every orphan's UID and incarnation.
func (o Orphans) each(fn func(uid types.UID, inc string)) {
	for _, d := range o.Deployments {
		fn(d.UID, d.Incarnation)
	}
	for _, v := range o.Services {
		fn(v.UID, v.Incarnation)
	}
}

// onlyOf reports whether every orphan belongs to incarnation inc.
func onlyOf(o Orphans, inc string) bool {
	only := true
	o.each(func(_ types.UID, i string) { only = only && i == inc })
	return only
}

func publishesDeleted(p Plan) bool {
	return p.Publish != nil && p.Publish.Status.Status == v1alpha1.DELETED
}

// agree reports whether the plan made from the caches (cached) and the one made from
// the apiserver's objects (confirmed) take the same destructive steps: every cached
// orphan an orphan by the apiserver's record too, the same record
// deleted and the same record finalized (by UID), both or neither publishing DELETED.
// The live status each would publish may differ (pods come from the cache in both) and
// so may RecheckAfter: neither destroys anything.
func agree(cached, confirmed Plan) bool {
	return within(cached.Orphans, confirmed.Orphans) && sameRecord(cached.DeleteRecord, confirmed.DeleteRecord) &&
		sameRecord(cached.Finalize, confirmed.Finalize) &&
		publishesDeleted(cached) == publishesDeleted(confirmed)
}

func sameRecord(a, b *container.Record) bool {
	return (a == nil) == (b == nil) && (a == nil || a.UID == b.UID)
}

// confirmedView is what a plan is confirmed on: the apiserver's record and the
// Deployments it listed (Cluster.Confirmed), with the cache's pods and Services, and the
// cache's Deployments where it listed none. Those are judged by the apiserver's record
// alone: they are orphans, or not, by whether it lives.
func confirmedView(api, cache container.Snapshot) container.Snapshot {
	api.Pods, api.Services = cache.Pods, cache.Services
	if api.Record == nil || api.Record.Terminating {
		api.Deployments = cache.Deployments
	}
	return api
}

// within reports whether every orphan of a is one of b (by UID).
func within(a, b Orphans) bool {
	uids := map[types.UID]bool{}
	b.each(func(uid types.UID, _ string) { uids[uid] = true })
	all := true
	a.each(func(uid types.UID, _ string) { all = all && uids[uid] })
	return all
}
