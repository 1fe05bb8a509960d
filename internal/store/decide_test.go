package store

import (
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const createTimeout = 20 * time.Second

func TestAbandonedByAge(t *testing.T) {
	for _, tc := range []struct {
		age  time.Duration
		want bool
	}{
		{0, false}, {20 * time.Second, false}, {39 * time.Second, false}, {40 * time.Second, true}, {time.Hour, true},
		{-time.Second, false}, // clock skew: a record "from the future" is young
	} {
		if got := abandonedByAge(t0, t0.Add(tc.age), createTimeout); got != tc.want {
			t.Errorf("age %s: abandoned %v, want %v", tc.age, got, tc.want)
		}
	}
}

// rec is a record of container x made ago before t0, as a create writes it (owed).
func rec(ago time.Duration, edit ...func(*container.Record)) container.Record {
	r := container.Record{Name: "dcm-container-x", UID: "r1", Owed: true, Created: t0.Add(-ago)}
	for _, e := range edit {
		e(&r)
	}
	return r
}

func terminatingRec(r *container.Record) { r.Terminating = true }
func finalizedRec(r *container.Record)   { r.Owed = false }

func ours(r container.Record) found { return found{Read: answered, Rec: r, Ours: true} }

// madeWith is a record made by a create with Idempotency-Key k and spec digest d.
func madeWith(k, d string) func(*container.Record) {
	return func(r *container.Record) { r.Request = container.Request{Key: k, Digest: d} }
}

// What a create does about the record holding its id (its record's create answered
// AlreadyExists), step by step.
func TestClaimID(t *testing.T) {
	const old = time.Hour
	var none container.Request
	for _, tc := range []struct {
		name    string
		f       found
		retried bool
		req     container.Request
		want    claim
	}{
		{"first: read the record", found{}, false, none, claimRead},
		{"a live record: another container's", ours(rec(0)), false, none, claimTaken},
		{"a live record, however old: never taken over (the controller settles one no Deployment joined)", ours(rec(old)), false, none, claimTaken},
		{"a terminating record: its DELETED is on its way", ours(rec(0, terminatingRec)), false, none, claimDeleting},
		{"a terminating record already finalized (the GC's finalizer holds it a moment)", ours(rec(0, terminatingRec, finalizedRec)), false, none, claimDeleting},
		{"someone else's ConfigMap with the record's name", found{Read: answered, Rec: rec(0)}, false, none, claimTaken},
		{"gone by the read: create it again", found{Read: absent}, false, none, claimRetry},
		{"gone again after the retry: another create got there first", found{Read: absent}, true, none, claimTaken},
		{"the read failed", found{Read: failed}, false, none, claimFailed},
		{"the same key and spec: the same request again", ours(rec(0, madeWith("k", "d"))), false, container.Request{Key: "k", Digest: "d"}, claimSame},
		{"the same key and spec, however old the record", ours(rec(old, madeWith("k", "d"))), false, container.Request{Key: "k", Digest: "d"}, claimSame},
		{"the same key with another spec", ours(rec(0, madeWith("k", "d"))), false, container.Request{Key: "k", Digest: "e"}, claimKeyReused},
		{"the same key with another spec, being deleted", ours(rec(0, madeWith("k", "d"), terminatingRec)), false, container.Request{Key: "k", Digest: "e"}, claimKeyReused},
		{"the same request, its container being deleted: retry (503)", ours(rec(0, madeWith("k", "d"), terminatingRec)), false, container.Request{Key: "k", Digest: "d"}, claimSameDeleting},
		{"another key: another container's", ours(rec(0, madeWith("k", "d"))), false, container.Request{Key: "j", Digest: "d"}, claimTaken},
		{"a key where the record has none", ours(rec(0)), false, container.Request{Key: "k", Digest: "d"}, claimTaken},
		{"no key where the record has one", ours(rec(0, madeWith("k", "d"))), false, none, claimTaken},
		{"a key on someone else's ConfigMap", found{Read: answered, Rec: rec(0, madeWith("k", "d"))}, false, container.Request{Key: "k", Digest: "d"}, claimTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimID(tc.f, tc.retried, tc.req); got != tc.want {
				t.Errorf("claimID = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestReservedInTime(t *testing.T) {
	const window = time.Second
	for _, tc := range []struct {
		took time.Duration
		want bool
	}{{0, true}, {time.Second, true}, {time.Second + time.Millisecond, false}, {time.Minute, false}} {
		if got := reservedInTime(t0, t0.Add(tc.took), window); got != tc.want {
			t.Errorf("reserved after %s: %v, want %v", tc.took, got, tc.want)
		}
	}
}

// A GET that missed the cache: one read of the record, by name.
func TestAnswerMiss(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    found
		want missAnswer
	}{
		{"first: read the record", found{}, missReadRecord},
		{"no record: 404", found{Read: absent}, missNotFound},
		{"a terminating record: deleted, 404", ours(rec(0, terminatingRec)), missNotFound},
		{"someone else's ConfigMap: 404", found{Read: answered, Rec: rec(0)}, missNotFound},
		{"a young live record: this cache is behind, wait for it", ours(rec(time.Second)), missWaitForCache},
		{"an old live record no Deployment joined: 404 at once", ours(rec(time.Hour)), missNotFound},
		{"the apiserver could not answer: 503", found{Read: failed}, missUnconfirmed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := answerMiss(tc.f, false, t0, createTimeout); got != tc.want {
				t.Errorf("answerMiss = %d, want %d", got, tc.want)
			}
		})
	}
}

// A DELETE, step by step: each row is one decision with what the DELETE knows by then.
func TestPlanDelete(t *testing.T) {
	live, term := rec(0), rec(0, terminatingRec)
	for _, tc := range []struct {
		name string
		f    deleteFacts
		want deleteStep
	}{
		{"the cache shows a live record: delete it now", deleteFacts{Cached: &live}, deleteIt},
		{"the cache shows nothing: wait out the reservation window", deleteFacts{}, deleteWait},
		{"the cache shows a terminating record: wait too (a next container may be reserving)", deleteFacts{Cached: &term}, deleteWait},
		{"waited, still nothing cached: read the record", deleteFacts{Waited: true}, deleteReadRecord},
		{"the apiserver has a live record (this cache is behind): delete it", deleteFacts{Waited: true, Record: ours(live)}, deleteIt},
		{"no record: 404", deleteFacts{Waited: true, Record: found{Read: absent}}, deleteNotFound},
		{"a terminating record: already deleted, 404", deleteFacts{Waited: true, Cached: &term, Record: ours(term)}, deleteNotFound},
		{"someone else's ConfigMap: 404", deleteFacts{Waited: true, Record: found{Read: answered, Rec: live}}, deleteNotFound},
		{"the apiserver could not answer: 503", deleteFacts{Waited: true, Record: found{Read: failed}}, deleteUnconfirmed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planDelete(tc.f); got != tc.want {
				t.Errorf("planDelete = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLateCreateWait(t *testing.T) {
	const window = time.Second
	for _, tc := range []struct{ since, want time.Duration }{
		{0, time.Second}, {300 * time.Millisecond, 700 * time.Millisecond}, {time.Second, 0}, {time.Minute, 0},
	} {
		if got := lateCreateWait(t0, t0.Add(tc.since), window); got != tc.want {
			t.Errorf("%s after it began: wait %s, want %s", tc.since, got, tc.want)
		}
	}
}

func TestConfirmDeleteReads(t *testing.T) {
	if !confirmDeleteReads(false) || confirmDeleteReads(true) {
		t.Error("the Confirm client reads only for an id the cache shows no record of")
	}
}
