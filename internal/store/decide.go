package store

import (
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The store's decisions, pure: each takes what the store found, in its cache or at the
// apiserver, and says what to do; create.go, delete.go and confirm.go make the calls.
// A container is its record (reserving the id, owning its objects) and the Deployment it
// controls. The record's finalizer keeps it terminating until its DELETED is delivered; a
// deletion timestamp never goes back, and the garbage collector deletes what it owned.

// lookup is how one read at the apiserver went.
type lookup int

const (
	notAsked lookup = iota // not read (yet)
	answered               // read: what it said is beside it
	absent                 // NotFound
	failed                 // any other error: the apiserver could not answer
)

// found is how a read of a record went and, if answered, whether it is the id's (Ours).
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

// claimID decides a create (made by req) whose id has a record. A live record is another
// container or create, never taken over: the status controller settles an abandoned one.
// This very request sent again (same Idempotency-Key and spec) gets the container it made;
// the key with another spec is refused. A terminating record frees the id once its DELETED
// is delivered; the same request then gets a 503, since DCM's agent retries only 5xx.
// A record gone by the read: the create tries once more.
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

// reservedInTime: a create may go on with its record only if reserved within window of
// began, so a DELETE that found nothing and looked again after window cannot be followed
// by this create's container (Store.ReserveWindow).
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

// answerMiss decides a cache miss from one read of the id's record at the apiserver. No
// record, someone else's ConfigMap or a terminating one: 404, as a Deployment without a
// live record is being garbage collected. So is an abandoned record (abandonedByAge): a
// fresh cache (checkFresh) would show its Deployment. A younger live record means the cache
// is behind: wait (ConfirmCacheWait), then 503, unless it saw that Deployment deleted
// (ended). No answer: 503, since a broken watch may have missed a create.
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

// abandonedByAge: a Deployment-less record older than twice createTimeout is no create in
// progress, since a create makes its Deployment within createTimeout or rolls back.
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
	// Cached is the cache's record (nil: none); Waited: the reservation window passed.
	Cached *container.Record
	Waited bool
	// Record is what reading the record at the apiserver found.
	Record found
}

// planDelete decides a DELETE. A live cached record is deleted at once: a create still
// to make its record gets AlreadyExists. Without one, an earlier create may still be making
// it, so the DELETE waits out Store.ReserveWindow and looks again, in the cache, then at
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

// lateCreateWait is how long a DELETE that began at began waits before looking again:
// after window, every earlier create has its record or will make nothing.
func lateCreateWait(began, now time.Time, window time.Duration) time.Duration {
	return max(0, began.Add(window).Sub(now))
}

// confirmDeleteReads: a DELETE's read goes through the separately limited Confirm client
// when the cache shows nothing, so a flood of DELETEs of unknown ids cannot slow other
// calls. A cached (stale) record is read through the main client.
func confirmDeleteReads(cacheShowsRecord bool) bool { return !cacheShowsRecord }
