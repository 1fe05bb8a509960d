package store

import (
	"maps"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

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

// claim is what a create does next about the Lease that holds its id: the create of
// the id's record answered AlreadyExists.
type claim int

const (
	claimRead            claim = iota // read the Lease
	claimTaken                        // 409: the id is another container's
	claimRetry                        // the Lease went meanwhile: create the record again
	claimListDeployments              // it may be abandoned: is there a Deployment of the id?
	claimTakeOver                     // abandoned: delete it (UID precondition), create again
)

// holder is what a create knows about the Lease holding its id.
type holder struct {
	// Retried: this was the create's second try (after the Lease went, or after a
	// take-over). Another AlreadyExists means another create got there first.
	Retried bool
	// Lease is how reading the Lease went: answered or absent.
	Lease lookup
	// Record is the Lease read as the id's record; Ours is false when it is not one
	// (someone else's Lease with the record's name: never taken over).
	Record container.Record
	Ours   bool
	// Listed: the id's Deployments were listed at the apiserver (not the cache: this
	// decides whether an id may be reused); Deployments is how many, in any state.
	Listed      bool
	Deployments int
}

// claimID decides what a create does about the Lease holding its id. The id is taken,
// unless the record is abandoned: recognisably this id's record (by label, not only by
// name), no DELETED owed on it, old enough (takeOverAllowed), and no Deployment carries
// the id. An abandoned record is replaced, guarded by a UID precondition so that only
// one of several concurrent takers succeeds; a second try never takes over again.
// (What a record being deleted or of another incarnation does is what any record does:
// neither is looked at.)
func claimID(h holder, now time.Time, createTimeout time.Duration) claim {
	switch {
	case h.Retried:
		return claimTaken
	case h.Lease == notAsked:
		return claimRead
	case h.Lease == absent:
		return claimRetry
	case !h.Ours || h.Record.Owed || !takeOverAllowed(h.Record.Created, now, createTimeout):
		return claimTaken
	case !h.Listed:
		return claimListDeployments
	case h.Deployments > 0:
		return claimTaken
	}
	return claimTakeOver
}

// takeOverAllowed is the age rule of a record that has no Deployment: only a provider
// that died mid-create leaves one, and a live create finishes (or rolls back) within
// createTimeout, so one older than twice that is abandoned.
func takeOverAllowed(created, now time.Time, createTimeout time.Duration) bool {
	return now.Sub(created) >= 2*createTimeout
}

// build is what a create does once its id is reserved.
type build int

const (
	buildAskAPIServer build = iota // the cache shows a live Deployment: ask the apiserver
	buildGo                        // create the Deployment and the Service
	buildTaken                     // 409 (after rolling back the record)
)

// buildAfterReserving decides whether a create whose record was just written may make
// the workload. A container whose record was deleted by hand, or made before records
// (e.g. by the reference provider), has none: the cache still knows its Deployment. The
// cache can also still show one deleted a moment ago (or minutes ago, when its watch is
// coming back from an apiserver outage: make chaos, seed 11), so the apiserver has the
// last word; it is asked only when the cache shows one (asked: it was; apiLive: it
// has one). A failed ask is the create's error, after rolling back the record.
func buildAfterReserving(cachedLive, asked, apiLive bool) build {
	switch {
	case !cachedLive:
		return buildGo
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

// answerMiss decides a cache miss with the apiserver: the id's record, read from etcd.
// None, one not ours, or one that owes a DELETED or is being deleted: the container
// does not exist, and the 404 is authoritative. A live record: the container exists, or
// a create is in progress, or its Deployment was deleted by hand a moment ago (its
// record not yet marked): its Deployment is looked up at the apiserver too; none live
// is a 404, one live means this cache is behind: wait for it. When the apiserver cannot
// answer (an outage, or this replica's confirmations are over their limit), the answer
// is 503: a 404 from the cache alone could be wrong (the chaos run's seed 11: a replica
// whose watch was broken by an apiserver restart answered 404 for a container created
// meanwhile).
func answerMiss(m miss) missAnswer {
	switch m.Record {
	case notAsked:
		return missReadRecord
	case absent:
		return missNotFound
	case failed:
		return missUnconfirmed
	}
	if !m.Ours || m.Rec.Owed || m.Rec.Terminating {
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
	Write *coordinationv1.Lease
	// Busy: someone is deleting the record; after Write, errRecordBusy asks for a
	// retry, which then creates it afresh.
	Busy bool
	// Foreign: the Lease has the record's name but is not the id's record: it is never
	// touched, and the caller is told to rename or remove it.
	Foreign bool
}

// fixRecord decides how the Lease cur, found with the name of container id's record,
// comes to say incarnation inc and, when owed, hold DELETED owed (RecordFinalizer). A
// record being deleted by hand that owes a DELETED not wanted any more is let go (our
// finalizer removed); one being deleted is never relabelled. cur is not changed.
func fixRecord(cur *coordinationv1.Lease, id, inc string, owed bool) recordFix {
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

// deletion is what a DELETE does with the objects of its id found at the apiserver.
type deletion struct {
	// NotFound: nothing of the container is left (no live Deployment, no Service): 404.
	NotFound bool
	// MarkOwed: the record is marked DELETED owed first, for incarnation Incarnation
	// (the live Deployment's), so the DELETED survives whatever happens next.
	MarkOwed    bool
	Incarnation string
	// Deployments and Services are deleted (pods follow by cascade), every one found.
	Deployments, Services []string
}

// planDelete decides a DELETE from the Deployments and the Service names of the id. A container
// with a live Deployment has its record marked owed, then everything of the id is
// deleted at once; one with only a Service left (or Deployments already being deleted
// and a Service) has those deleted with no mark: nothing live is being deleted.
// Deployments already being deleted and nothing else: 404.
func planDelete(deps []*container.Deployment, svcs []string) deletion {
	live := container.Snapshot{Deployments: deps}.Live()
	if live == nil && len(svcs) == 0 {
		return deletion{NotFound: true}
	}
	var d deletion
	if live != nil {
		d.MarkOwed, d.Incarnation = true, live.Incarnation
	}
	for _, dep := range deps {
		d.Deployments = append(d.Deployments, dep.Name)
	}
	d.Services = svcs
	return d
}
