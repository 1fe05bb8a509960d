package store

import (
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The store's decisions, pure (the way internal/status/plan.go is): each takes what the
// store found, in its caches or at the apiserver, and says what to do; create.go,
// delete.go and confirm.go make the client calls around them. decide_test.go has one
// row per case.
//
// What they rest on: a container is its record (the id's reservation and the owner of
// its Deployment and Service) and the Deployment the record controls. A record is
// created with a finalizer, so a deleted one stays, terminating, until its DELETED is
// delivered, and a deletion timestamp never goes back; the garbage collector deletes
// whatever a deleted record owned.

// lookup is how one read at the apiserver went.
type lookup int

const (
	notAsked lookup = iota // not read (yet)
	answered               // read: what it said is beside it
	absent                 // NotFound
	failed                 // any other error: the apiserver could not answer
)

// found is a record as a read found it: how the read went and, when it answered,
// whether the object is the id's record (Ours) and what it says.
type found struct {
	Read lookup
	Rec  container.Record
	Ours bool
}

// live: the read found the id's record, not deleted.
func (f found) live() bool { return f.Read == answered && f.Ours && !f.Rec.Terminating }

// --- A create whose record's create answered AlreadyExists ---

// claim is what such a create does next.
type claim int

const (
	claimRead         claim = iota // read the record
	claimRetry                     // it went meanwhile: create the record again (once)
	claimTaken                     // 409 already exists: the id is another container's, or someone else's ConfigMap
	claimDeleting                  // 409 being deleted: the id's container was deleted and its DELETED is not delivered yet
	claimFailed                    // the read failed: the create's error
	claimSame                      // the same request again (its Idempotency-Key and spec): answer with its container
	claimKeyReused                 // 422: the record's Idempotency-Key, with another spec
	claimSameDeleting              // the same request again, but its container is being deleted: 503, retry
)

// claimID decides a create (made by req) whose id already has a record. A live record
// is another container (or another create, a moment ahead): never taken over, whatever
// its age (a record no Deployment joined is the status reporter's to settle,
// status.plan), unless it is this very request's, sent again with its Idempotency-Key
// (the same key and spec): that is answered with the container it made. The key with
// another spec is refused. A terminating record is a deleted container whose DELETED
// is on its way: the id is free once it is delivered (Retry-After); the same request's
// is retried as unavailable (503), so that a client that retries only 5xx (DCM's
// environment agent) makes it once the id is free. Gone by the read: the create tries
// once more.
func claimID(f found, retried bool, req container.Request) claim {
	switch {
	case f.Read == notAsked:
		return claimRead
	case f.Read == failed:
		return claimFailed
	case f.Read == absent && !retried:
		return claimRetry
	case f.Read == absent, !f.Ours:
		return claimTaken
	case req.Key != "" && f.Rec.Request.Key == req.Key && f.Rec.Request.Digest != req.Digest:
		return claimKeyReused
	case req.Key != "" && f.Rec.Request.Key == req.Key && f.Rec.Terminating:
		return claimSameDeleting
	case req.Key != "" && f.Rec.Request.Key == req.Key:
		return claimSame
	case !f.Rec.Terminating:
		return claimTaken
	}
	return claimDeleting
}

// --- A create after it has its record ---

// reservedInTime decides whether a create that began at began may go on with the
// record it had at reserved (when the answer to its create came back): only within
// window, so that a DELETE that found nothing and looked again window after it began
// cannot be followed by this create's container (see Store.ReserveWindow).
func reservedInTime(began, reserved time.Time, window time.Duration) bool {
	return reserved.Sub(began) <= window
}

// --- A read (GET) that missed the cache ---

// missAnswer is what a GET that missed the cache does next.
type missAnswer int

const (
	missReadRecord   missAnswer = iota // read the id's record at the apiserver
	missNotFound                       // 404, authoritative
	missUnconfirmed                    // 503: the apiserver could not answer
	missWaitForCache                   // a live record: this cache is behind; wait for it
)

// answerMiss decides a cache miss with one read at the apiserver: the id's record, by
// name. No record, someone else's ConfigMap, or a terminating record: no container (a
// Deployment without a live record is not one: the garbage collector is removing it),
// 404. A live record older than any create takes (abandonedByAge) that this replica's
// cache shows no container of: its creator died before making the Deployment, or the
// Deployment was deleted by hand (the status reporter settles it), 404 too: a
// Deployment made that long ago is in a cache that is not behind (checkFresh). A
// younger live record: the container exists or is being created, and this replica's
// cache has not caught up: wait for it (ConfirmCacheWait), then 503; unless this
// replica's cache saw the Deployment of that very record deleted (ended: deleted by
// hand a moment ago, the reporter about to settle the record): 404 at once. When the
// apiserver cannot answer, 503: a 404 from the cache alone could be wrong (a replica
// whose watch is broken has not seen a container created meanwhile).
func answerMiss(f found, ended bool, now time.Time, createTimeout time.Duration) missAnswer {
	switch {
	case f.Read == notAsked:
		return missReadRecord
	case f.Read == failed:
		return missUnconfirmed
	case f.live() && !ended && !abandonedByAge(f.Rec.Created, now, createTimeout):
		return missWaitForCache
	}
	return missNotFound
}

// abandonedByAge: a record with no Deployment older than twice createTimeout is not a
// create in progress (a create makes its Deployment within createTimeout or rolls
// back).
func abandonedByAge(created, now time.Time, createTimeout time.Duration) bool {
	return now.Sub(created) >= 2*createTimeout
}

// --- DELETE ---

// deleteStep is what a DELETE does next.
type deleteStep int

const (
	deleteWait        deleteStep = iota // the cache shows no live record: wait out the reservation window, then look again
	deleteReadRecord                    // still none in the cache: read the record at the apiserver
	deleteNotFound                      // 404
	deleteUnconfirmed                   // 503: the apiserver could not answer
	deleteIt                            // delete the record (and the Deployment, when known)
)

// deleteFacts is what a DELETE knows when it decides.
type deleteFacts struct {
	// Cached is the record the cache shows (nil: none); Waited: the DELETE has waited
	// out the reservation window since it began.
	Cached *container.Record
	Waited bool
	// Record is what reading the record at the apiserver found.
	Record found
}

// planDelete decides a DELETE. A live record in the cache is deleted at once: any
// create of the id that has not made its record yet finds it (AlreadyExists). Without
// one, a create that began before this DELETE may still be making its record: the
// DELETE looks again once every such create has its record or has given up
// (Store.ReserveWindow after the DELETE began), first in the cache, then, by name, at
// the apiserver. A terminating record is a container already deleted: 404.
func planDelete(f deleteFacts) deleteStep {
	switch {
	case f.Cached != nil && !f.Cached.Terminating:
		return deleteIt
	case !f.Waited:
		return deleteWait
	case f.Record.Read == notAsked:
		return deleteReadRecord
	case f.Record.Read == failed:
		return deleteUnconfirmed
	case f.Record.live():
		return deleteIt
	}
	return deleteNotFound
}

// lateCreateWait is how much longer a DELETE that began at began and found nothing of
// its id waits before it looks again: until window has passed, every create that
// began before it has its record or will make nothing.
func lateCreateWait(began, now time.Time, window time.Duration) time.Duration {
	return max(0, began.Add(window).Sub(now))
}

// confirmDeleteReads decides which client a DELETE's read goes through: the Confirm
// client (rate limited on its own) when the cache shows nothing of the id, so a flood
// of DELETEs of unknown ids never slows the provider's other Kubernetes calls (issue
// 23); the main client when it shows a record (a stale one: this replica is behind).
func confirmDeleteReads(cacheShowsRecord bool) bool { return !cacheShowsRecord }
