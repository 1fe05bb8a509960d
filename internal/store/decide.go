package store

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The store's decisions, pure (the way internal/status/plan.go is): each takes what the
// store found, in its caches or at the apiserver, and says what to do; record.go,
// confirm.go, create.go and delete.go make the client calls around them (and the
// waits, retries and rollback, which decide nothing about records).
//
// A decision that needs a fact only a further request can tell (is there a Deployment
// of the id at the apiserver?) answers "ask", and is asked again with the answer: so
// the store makes exactly the requests a decision needs, no more. decide_test.go has
// one row per case.

// lookup is how one read at the apiserver went.
type lookup int

const (
	notAsked lookup = iota // not read (yet)
	answered               // read: what it said is beside it
	absent                 // NotFound
	failed                 // any other error: the apiserver could not answer
)

// --- Reserving an id (a create) ---

// claim is what a create does next about the record that holds its id: the create of
// the id's record answered AlreadyExists.
type claim int

const (
	claimRead             claim = iota // read the record
	claimTaken                         // 409: the id is another container's
	claimRetry                         // the record went meanwhile: create the record again
	claimListDeployments               // it may be abandoned: is there a Deployment of the id?
	claimPreviousDeleting              // 409 with Retry-After: the previous container's DELETED is not delivered yet
	claimWaitDeleted                   // someone is deleting the record: wait briefly, read it again
	claimBusy                          // it is still being deleted after the waits: 503 (errRecordBusy)
)

// claimWaits is how many times a create waits for a record someone is deleting (not
// one owing a DELETED: that one stays until the DELETED is delivered) before it gives
// up: with the backoff in reserve, about 1.5 s, as long as a plain record takes to go.
const claimWaits = 5

// holder is what a create knows about the record holding its id.
type holder struct {
	// Retried: this was the create's second try (after the record went). Another
	// AlreadyExists means another create got there first.
	Retried bool
	// Held is how reading the record went: answered or absent.
	Held lookup
	// Record is the object read as the id's record; Ours is false when it is not one
	// (someone else's ConfigMap with the record's name: never taken over).
	Record container.Record
	Ours   bool
	// Waited is how many times the create waited for the record to go (claimWaitDeleted).
	Waited int
	// Listed: the id's Deployments were listed at the apiserver (not the cache: this
	// decides whether an id may be reused); Deployments is how many, in any state.
	Listed      bool
	Deployments int
}

// claimID decides what a create does about the record holding its id. The id is taken,
// unless the record is abandoned: recognisably this id's record (by label, not only by
// name), no DELETED owed on it, old enough (abandonedByAge), and no Deployment carries
// the id. An abandoned record is replaced, guarded by a UID precondition so that only
// one of several concurrent takers succeeds; a second try never takes over again.
//
// A record being deleted is not a container any more: one owing a DELETED is the
// previous container's, whose DELETED is not delivered yet (the reporter deletes the
// record, then lets it go once DCM has been told): 409, and the client is told when to
// come back. One owing nothing is going (a clean-up by hand, a rollback): the create
// waits for it briefly and tries again. (A record of another incarnation is like any.)
func claimID(h holder, now time.Time, createTimeout time.Duration) claim {
	switch {
	case h.Retried:
		return claimTaken
	case h.Held == notAsked:
		return claimRead
	case h.Held == absent:
		return claimRetry
	case !h.Ours:
		return claimTaken
	case h.Record.Terminating && h.Record.Owed:
		return claimPreviousDeleting
	case h.Record.Terminating && h.Waited < claimWaits:
		return claimWaitDeleted
	case h.Record.Terminating:
		return claimBusy
	case h.Record.Owed || !abandonedByAge(h.Record.Created, now, createTimeout):
		return claimTaken
	case !h.Listed:
		return claimListDeployments
	case h.Deployments > 0:
		return claimTaken
	}
	// Old, and no Deployment: an abandoned create, or a container whose Deployment was
	// deleted by hand while no reporter knew it ran. Never taken over: a new container
	// of the id must come after the old one's DELETED (the chaos run, seed 114630519: a
	// take-over of a hand-deleted container's record made a second container with no
	// DELETED between). The status reporter reports it DELETED and deletes the record
	// (status.plan, settle = twice the create timeout); until then, 409 with Retry-After.
	return claimPreviousDeleting
}

// abandonedByAge is the age rule of a record that has no Deployment: only a provider
// that died mid-create leaves one, and a live create finishes (or rolls back) within
// createTimeout, so one older than twice that is abandoned.
func abandonedByAge(created, now time.Time, createTimeout time.Duration) bool {
	return now.Sub(created) >= 2*createTimeout
}

// build is what a create does once its id is reserved.
type build int

const (
	buildAskAPIServer build = iota // ask the apiserver whether a live Deployment carries the id
	buildGo                        // create the Service, then the Deployment
	buildTaken                     // 409 (after rolling back the record)
)

// buildAfterReserving decides whether a create whose record was just written may make
// the workload. A container whose record was deleted by hand, or made before records
// (e.g. by the reference provider), has none, so the record alone does not say the id
// is free: its Deployment does. The apiserver is always asked (asked: it was; apiLive:
// it has one), not the cache: the cache can lack a Deployment made a moment ago on
// another replica or by someone else (two containers for one id), and can still show
// one deleted minutes ago while its watch comes back from an apiserver outage (make
// chaos, seed 11). A failed ask is the create's error, after rolling back the record.
func buildAfterReserving(asked, apiLive bool) build {
	switch {
	case !asked:
		return buildAskAPIServer
	case apiLive:
		return buildTaken
	}
	return buildGo
}

// --- A read that missed the cache ---

// missAnswer is what a GET that missed the cache does next.
type missAnswer int

const (
	missReadRecord      missAnswer = iota // read the id's record at the apiserver
	missNotFound                          // 404, authoritative
	missUnconfirmed                       // 503: the apiserver could not answer
	missListDeployments                   // a live record: ask for the id's live Deployment
	missWaitForCache                      // it lives: this cache is behind; wait for it
)

// miss is what the apiserver said about an id the cache does not show.
type miss struct {
	// Record is how reading the id's record went; Rec and Ours are what was read.
	Record lookup
	Rec    container.Record
	Ours   bool
	// Deployments is how listing the id's Deployments went; Live: one of them lives.
	Deployments lookup
	Live        bool
}

// answerMiss decides a cache miss with the apiserver: the id's record, read from etcd,
// then, unless the record says the container was deleted, the id's live Deployment. A
// record that owes a DELETED: the container was deleted (a DELETE marks the record
// before it deletes the workload), and the 404 is authoritative. Anything else (no
// record, one not ours, a live one, one being deleted by hand) does not tell: a
// container without a record (made by the reference provider, or its record deleted
// by hand) lives as long as its Deployment does, and a live record may be a create in
// progress. So the id's Deployments are looked up at the apiserver: none live is a 404,
// one live means this cache is behind: wait for it. When the apiserver cannot answer
// (an outage, or this replica's confirmations are over their limit), the answer is
// 503: a 404 from the cache alone could be wrong (the chaos run's seed 11: a replica
// whose watch was broken by an apiserver restart answered 404 for a container created
// meanwhile).
func answerMiss(m miss) missAnswer {
	switch m.Record {
	case notAsked:
		return missReadRecord
	case failed:
		return missUnconfirmed
	}
	if m.Record == answered && m.Ours && m.Rec.Owed {
		return missNotFound
	}
	switch m.Deployments {
	case notAsked:
		return missListDeployments
	case answered:
	default:
		return missUnconfirmed
	}
	if !m.Live {
		return missNotFound
	}
	return missWaitForCache
}

// --- Writing a record (the reporter restores or marks one; DELETE marks one) ---

// recordFix is what EnsureRecord does with the record it found (its create answered
// AlreadyExists).
type recordFix struct {
	// Write is the record to write (an update); nil: nothing to write.
	Write *corev1.ConfigMap
	// Busy: someone is deleting the record; after Write, errRecordBusy asks for a
	// retry, which then creates it afresh.
	Busy bool
	// Foreign: the ConfigMap has the record's name but is not the id's record: it is never
	// touched, and the caller is told to rename or remove it.
	Foreign bool
}

// fixRecord decides how the ConfigMap cur, found with the name of container id's record,
// comes to say incarnation inc and, when owed, hold DELETED owed (RecordFinalizer). A
// record being deleted by hand that owes a DELETED not wanted any more is let go (our
// finalizer removed); one being deleted is never relabelled. cur is not changed.
func fixRecord(cur *corev1.ConfigMap, id, inc string, owed bool) recordFix {
	rec, ok := container.RecordOf(cur, id)
	if !ok {
		return recordFix{Foreign: true}
	}
	if rec.Terminating {
		if rec.Owed && owed {
			return recordFix{} // it stays until the DELETED is delivered, as wanted
		}
		if rec.Owed {
			w := cur.DeepCopy()
			w.Finalizers = withoutRecordFinalizer(w.Finalizers)
			return recordFix{Write: w, Busy: true}
		}
		return recordFix{Busy: true}
	}
	want := container.RecordLabels(id, inc)
	if rec.Incarnation == inc && (rec.Owed || !owed) && equalLabels(cur.Labels, want) {
		return recordFix{}
	}
	w := cur.DeepCopy()
	w.Labels = maps.Clone(w.Labels) // never nil: RecordOf found the id's labels on it
	maps.Copy(w.Labels, want)
	if inc == "" {
		delete(w.Labels, container.LabelIncarnation)
	}
	if owed && !rec.Owed {
		w.Finalizers = append(w.Finalizers, container.RecordFinalizer)
	}
	return recordFix{Write: w}
}

func equalLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func withoutRecordFinalizer(f []string) []string {
	return slices.DeleteFunc(slices.Clone(f), func(s string) bool { return s == container.RecordFinalizer })
}

// --- DELETE ---

// object is one Deployment or Service of an id as DELETE found it at the apiserver:
// what it needs to decide and to delete it (UID precondition), nothing more.
type object struct {
	Name        string
	UID         types.UID
	Incarnation string
	Deleting    bool
	Created     time.Time
}

// deleteFacts is what a DELETE found at the apiserver about its id, read in this order:
// the Deployments, the Services, then the record. The record is read last so that a
// Service in the lists is never a create's that this DELETE could miss: a create makes
// its record before its Service, so if the record is absent when read, any create that
// will still commit reserved after the lists were read, and none of its objects is in
// them.
type deleteFacts struct {
	// Record is how reading the id's record went (answered or absent); Rec and Ours are
	// what was read.
	Record lookup
	Rec    container.Record
	Ours   bool
	// Deployments and Services of the id; Deployments oldest first.
	Deployments, Services []object
}

// deletion is what a DELETE does with what it found.
type deletion struct {
	// InProgress: a create of the id is in progress (its record lives and its
	// Deployment is not made yet): nothing is done; the DELETE waits and decides again
	// with what it reads then, or answers 409 (errCreateInProgress).
	InProgress bool
	// NotFound: the answer is 404, once what is below is done (the record of an
	// abandoned create may be deleted with a 404: no container was there).
	NotFound bool
	// MarkOwed: the record is marked DELETED owed first, for incarnation Incarnation
	// (the live Deployment's), so the DELETED survives whatever happens next.
	MarkOwed    bool
	Incarnation string
	// Deployments and Services are deleted (pods follow by cascade), every one found,
	// each with a UID precondition.
	Deployments, Services []object
}

// planDelete decides a DELETE. A container with a live Deployment has its record
// marked owed, then everything of the id is deleted at once: a Deployment is the last
// thing a create makes (create.go), so once one exists no create of the id makes
// anything more. Without one, a live record (not owed, not being deleted) with no
// Deployment of its incarnation is a create that has not made its Deployment yet: while
// it is younger than an abandoned create (abandonedByAge), the DELETE waits for it
// (InProgress), and never answers while the create may still finish; once older, it was
// abandoned by a replica that died mid-create: its record and any Service are deleted,
// 204 when there was a Service, else 404 (no container was ever there for DCM to know
// of). Otherwise a Service left (and any Deployment being deleted) is deleted with no
// mark: nothing live is being deleted. No Service and no live Deployment is a 404
// (Deployments being deleted already are left to finish).
func planDelete(f deleteFacts, now time.Time, createTimeout time.Duration) deletion {
	var live *object
	for i := range f.Deployments {
		if !f.Deployments[i].Deleting {
			live = &f.Deployments[i]
			break
		}
	}
	d := deletion{Deployments: f.Deployments, Services: f.Services}
	switch {
	case live != nil:
		d.MarkOwed, d.Incarnation = true, live.Incarnation
		return d
	case f.Record == answered && f.Ours && !f.Rec.Owed && !f.Rec.Terminating &&
		!slices.ContainsFunc(f.Deployments, func(o object) bool { return o.Incarnation == f.Rec.Incarnation }):
		if !abandonedByAge(f.Rec.Created, now, createTimeout) {
			return deletion{InProgress: true}
		}
		// Old: an abandoned create, or a container whose Deployment was deleted by hand
		// and whose DELETED is not sent yet. Its record is never deleted here (the chaos
		// run, seed 114630519: a DELETE that deleted such a record lost the container's
		// DELETED, and a create of the id made a second container): marked owed, so the
		// reporter reports it DELETED and deletes it; its Services go now; 204.
		d.MarkOwed, d.Incarnation = true, f.Rec.Incarnation
		return d
	}
	if len(f.Services) == 0 { // nothing, or Deployments being deleted already
		d.NotFound, d.Deployments = true, nil
	}
	return d
}

// createWaitBound is how long a DELETE that found a create of its id in progress waits
// for it (polling the apiserver), and, past that, the Retry-After of its 409. A create
// makes its Deployment before its deadline, CreateTimeout after it reserved the id (its
// record's creation), or never: so the DELETE waits until then, and a DELETE still
// facing a record without a Deployment at that point faces a create that failed and is
// rolling back (or a Deployment answer lost at the apiserver): it answers 409 and the
// client comes back once the record counts as abandoned (twice CreateTimeout), when the
// DELETE can clean up whatever is left. The request's own deadline bounds the wait too
// (delete.go). Retry-After is at least a second.
func createWaitBound(created, now time.Time, createTimeout time.Duration) (wait time.Duration, retryAfter int) {
	age := now.Sub(created)
	wait = max(createTimeout-age, 0)
	left := 2*createTimeout - age - wait
	return wait, max(int((left+time.Second-1)/time.Second), 1)
}

// confirmDeleteReads decides which client a DELETE reads through: the Confirm client
// (rate limited on its own) while nothing of the id is known, so that a flood of
// DELETEs of unknown ids never slows the provider's other Kubernetes calls (issue 23:
// 16 clients of them slowed real creates from ~10 ms to ~350 ms); the main client as
// soon as the caches show anything of the id (record, Deployment or Service), or a read
// found something.
func confirmDeleteReads(cacheShowsAny, found bool) bool {
	return !cacheShowsAny && !found
}

// --- The uninstall ---

// releaseWrite is what is written to the record cur before it is deleted anyway (by
// the uninstall; the record listed had UID uid): RecordFinalizer off, when the current
// record still has it; nil when there is nothing to write (gone, no finalizer now
// whatever the listing said, or another record of the id by now, which is not touched).
func releaseWrite(cur *corev1.ConfigMap, uid types.UID) *corev1.ConfigMap {
	if cur == nil || cur.UID != uid || !slices.Contains(cur.Finalizers, container.RecordFinalizer) {
		return nil
	}
	w := cur.DeepCopy()
	w.Finalizers = withoutRecordFinalizer(w.Finalizers)
	return w
}

// --- EnsureRecord ---

// ensureAttempts bounds EnsureRecord's creates: a record found by the create
// (AlreadyExists) and gone by the read that follows was deleted in between (its DELETED
// delivered, or a clean-up by hand), and is created again. More than a few in a row
// is someone deleting it as fast as it is made.
const ensureAttempts = 4

// recreateRecord decides whether EnsureRecord creates the record again after attempt
// (from 1) found it by its create and not by the read that followed.
func recreateRecord(attempt int) bool { return attempt < ensureAttempts }

// --- A DELETE after a create that began before it (Store.ReserveWindow) ---

// reservedInTime decides whether a create that began at began may keep the reservation
// it had at reserved (when the answer to its record's create came back): only within
// window, so that a DELETE that found nothing and looked again window after it began
// cannot be followed by this create's container.
func reservedInTime(began, reserved time.Time, window time.Duration) bool {
	return reserved.Sub(began) <= window
}

// lateCreateWait is how much longer a DELETE that began at began and found nothing of
// its id waits before it looks again and answers 404: until window has passed, every
// create that began before it has reserved its id or will roll back.
func lateCreateWait(began, now time.Time, window time.Duration) time.Duration {
	return max(0, began.Add(window).Sub(now))
}

// unmarkAfterFailedDelete decides whether a DELETE that failed after marking record rec
// owed for incarnation inc takes the mark off again: only its own mark (that
// incarnation, not being deleted) on a container whose Deployment still lives. A
// container gone meanwhile keeps it: its DELETED is due.
func unmarkAfterFailedDelete(rec container.Record, inc string, live bool) bool {
	return rec.Owed && !rec.Terminating && rec.Incarnation == inc && live
}
