package status

import (
	"crypto/sha256"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Plan is what the controller does for one container, decided from its snapshot alone. Steps
// run in order: delete orphans, delete the record, publish, finalize. A failed step stops
// the rest and the retry plans again (each step is idempotent). A destructive plan
// (NeedsConfirmation) runs only if the plan from the apiserver's objects agrees.
type Plan struct {
	// Orphans are the id's Deployments and Services no live record owns, deleted by UID even
	// without NATS: the garbage collector keeps them while their record waits for its DELETED,
	// and the DELETED waits for them.
	Orphans Orphans
	// DeleteRecord is a live record no live Deployment joined: its container is gone or never
	// made. Deleting it acts as a DELETE: the garbage collector takes its dependents, then DELETED.
	DeleteRecord *container.Record
	// Publish is the report to deliver; nil when DCM already has it.
	Publish *Report
	// Finalize is the deleted record to unfinalize once a stream has stored its DELETED.
	Finalize *container.Record
	// ResolveImage is a live Deployment held at zero pods until its image resolves.
	ResolveImage *container.Deployment
	// RecheckAfter plans the container again after this long: a create may be in progress.
	RecheckAfter time.Duration
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool {
	return p.Orphans.Empty() && p.DeleteRecord == nil && p.Publish == nil && p.Finalize == nil && p.RecheckAfter == 0 && p.ResolveImage == nil
}

// plan decides what to do for a container. snap is the caches' view, last what DCM was last
// given about this incarnation (nil: none known), forced sends even if unchanged.
//
//   - Orphans are always deleted.
//   - A live container (a live record and the Deployment it controls): its status.
//   - A terminating record owing its DELETED: once no orphan is left, DELETED, then Finalize.
//   - A live record with no live Deployment is a create in progress until settle old or
//     reported live; then it is gone: DeleteRecord.
//   - No record: once no orphan is left, DELETED if this controller reported it live (a
//     record whose finalizer was stripped by hand).
func plan(snap container.Snapshot, last *delivered, forced bool, now time.Time, settle time.Duration) Plan {
	p := Plan{Orphans: orphansOf(snap)}
	rec := snap.Record
	wasLive := last != nil && last.status != v1alpha1.DELETED
	switch {
	case snap.Live() != nil:
		p.Publish = changed(reportOf(snap), last, forced)
		if d := snap.Live(); d.ImagePending != "" {
			p.ResolveImage = d
		}
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

// orphansOf finds objects whose controller reference is a record other than the live one,
// not already deleting. Objects without such an owner are someone else's: never touched.
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

// delivered is what is kept of the last delivered report: its status and print, not the
// report, to keep memory small. The zero delivered is none.
type delivered struct {
	status v1alpha1.ContainerStatus
	print  reportPrint
}

func deliveredOf(r Report) delivered { return delivered{status: r.Status.Status, print: r.print()} }

// none: nothing was delivered.
func (d delivered) none() bool { return d.status == "" }

// reportPrint is the first 16 bytes of the SHA-256 of a report's status and outputs as JSON.
// Reports that tell DCM the same share a print (container.OutputsOf has a fixed order), and
// a difference Same overlooks (an empty list for none) only costs an extra event.
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
	// Outputs are its addresses and ports (output_spec) when RUNNING, as DCM binds dependents
	// to a RUNNING resource's outputs. Other statuses send none, and DCM keeps what it stored.
	Outputs container.Outputs
	// Observed is when the controller first planned this report, the event's time; kept through
	// one event's retries (Controller.eventID) and ignored by Same.
	Observed time.Time
}

// Same reports whether r and o tell DCM the same status, message and outputs. An outputs-only
// change (a new pod IP) is sent, so DCM binds dependents to the current address.
func (r Report) Same(o Report) bool { return r.Status == o.Status && r.Outputs.Equal(o.Outputs) }

// reportOf is the snapshot's report: its container's status, and outputs when RUNNING.
func reportOf(snap container.Snapshot) Report {
	o, _ := snap.Observed()
	rep := Report{Status: container.StatusOf(o.Deployment, o.Pods)}
	if rep.Status.Status == v1alpha1.RUNNING {
		rep.Outputs = container.OutputsOf(o)
	}
	return rep
}

// NeedsConfirmation reports whether p takes a step a cache alone must not decide: deleting
// orphans or a record, or publishing DELETED. Each cache lags on its own while its watch
// recovers, and a stale record already finalized would resend DELETED after the id is reused.
// Finalize follows a confirmed DELETED and is guarded by UID; a live status needs no
// confirmation, as the next change or republish corrects it.
func (p Plan) NeedsConfirmation() bool {
	return !p.Orphans.Empty() || p.DeleteRecord != nil || publishesDeleted(p)
}

// needsConfirmation is p.NeedsConfirmation, except for the DELETED (and finalize) of a
// deleted record this controller reported live in this leadership (knownLive). Deletion
// timestamps never go back and only the leader removes the finalizer, so the cached record
// is the one reported, not a stale predecessor; this spares an apiserver read per DELETE.
// Orphans of a record being deleted need none either: they are orphans for good.
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

// agree reports whether the cached and confirmed plans take the same destructive steps:
// cached orphans are orphans to the apiserver too, the same records (by UID) are deleted and
// finalized, and both or neither publish DELETED. Live status and RecheckAfter may differ.
func agree(cached, confirmed Plan) bool {
	return within(cached.Orphans, confirmed.Orphans) && sameRecord(cached.DeleteRecord, confirmed.DeleteRecord) &&
		sameRecord(cached.Finalize, confirmed.Finalize) &&
		publishesDeleted(cached) == publishesDeleted(confirmed)
}

func sameRecord(a, b *container.Record) bool {
	return (a == nil) == (b == nil) && (a == nil || a.UID == b.UID)
}

// confirmedView is the apiserver's record and Deployments (Cluster.Confirmed) with the
// cache's pods and Services, and the cache's Deployments when the record is not live:
// whether those are orphans is judged by the apiserver's record alone.
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
