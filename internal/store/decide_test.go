package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
		{-time.Second, false}, // clock skew: a reservation "from the future" is young
	} {
		if got := abandonedByAge(t0, t0.Add(tc.age), createTimeout); got != tc.want {
			t.Errorf("age %s: take over %v, want %v", tc.age, got, tc.want)
		}
	}
}

// rec is a record of container x made ago before t0.
func rec(ago time.Duration, edit ...func(*container.Record)) container.Record {
	r := container.Record{Name: "dcm-container-x", UID: "r1", Incarnation: "i1", Created: t0.Add(-ago)}
	for _, e := range edit {
		e(&r)
	}
	return r
}

func owedRec(r *container.Record)        { r.Owed = true }
func terminatingRec(r *container.Record) { r.Terminating = true }

// What a create does about the record holding its id, step by step: each row is one
// decision, with what the create knows by then.
func TestClaimID(t *testing.T) {
	const old, young = time.Hour, 5 * time.Second
	read := func(r container.Record) holder { return holder{Held: answered, Record: r, Ours: true} }
	listed := func(r container.Record, deps int) holder {
		h := read(r)
		h.Listed, h.Deployments = true, deps
		return h
	}
	for _, tc := range []struct {
		name string
		h    holder
		want claim
	}{
		{"first AlreadyExists: read what holds the id", holder{}, claimRead},
		{"second AlreadyExists (after a retry): another create got there first",
			holder{Retried: true}, claimTaken},
		{"the record went before it could be read (free): create again", holder{Held: absent}, claimRetry},
		{"someone else's ConfigMap with the record's name: taken, never touched, however old",
			holder{Held: answered, Record: rec(old), Ours: false}, claimTaken},
		{"a record owing a DELETED: taken until it is delivered", read(rec(old, owedRec)), claimTaken},
		{"a young record: a create may still be in flight", read(rec(young)), claimTaken},
		{"a record just under twice the create timeout: still young", read(rec(2*createTimeout - time.Nanosecond)), claimTaken},
		{"a record from the future (clock skew): young", read(rec(-time.Minute)), claimTaken},
		{"an old record of ours owing nothing: ask whether a Deployment carries the id",
			read(rec(old)), claimListDeployments},
		{"old, but a Deployment carries the id (live, or being deleted): taken", listed(rec(old), 1), claimTaken},
		{"old, no Deployment: an abandoned create or a hand-deleted container, never taken over: 409 until the reporter has sent its DELETED",
			listed(rec(old), 0), claimPreviousDeleting},
		{"old, of another incarnation, no Deployment: the same (the incarnation is not looked at)",
			listed(rec(old, func(r *container.Record) { r.Incarnation = "i0" }), 0), claimPreviousDeleting},
		// Issue 23: a record being deleted is not a container any more.
		{"being deleted and owed: the previous container's DELETED is not delivered yet: 409 with Retry-After",
			read(rec(young, owedRec, terminatingRec)), claimPreviousDeleting},
		{"being deleted and owed, old: the same", read(rec(old, owedRec, terminatingRec)), claimPreviousDeleting},
		{"being deleted, owing nothing (a clean-up by hand, a rollback): wait for it to go",
			read(rec(young, terminatingRec)), claimWaitDeleted},
		{"being deleted, owing nothing, old: wait too (never taken over)", read(rec(old, terminatingRec)), claimWaitDeleted},
		{"still being deleted after the last wait: 503, retry", func() holder {
			h := read(rec(young, terminatingRec))
			h.Waited = claimWaits
			return h
		}(), claimBusy},
		{"waited, and the record went: create again", holder{Held: absent, Waited: 2}, claimRetry},
		{"someone else's ConfigMap being deleted: taken, never waited for",
			holder{Held: answered, Record: rec(young, terminatingRec), Ours: false}, claimTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimID(tc.h, t0, createTimeout); got != tc.want {
				t.Errorf("claimID = %v, want %v", got, tc.want)
			}
		})
	}
}

// Whether a create, its id reserved, makes the workload: the apiserver is asked every
// time, since the cache may lack a Deployment of the id that has no record, or still
// show one that is gone.
func TestBuildAfterReserving(t *testing.T) {
	for _, tc := range []struct {
		name           string
		asked, apiLive bool
		want           build
	}{
		// Issue 23: an empty cache was trusted, and a Deployment without a record that it
		// did not show yet got a second container with its id.
		{"not asked yet: ask the apiserver, whatever the cache shows", false, false, buildAskAPIServer},
		{"the apiserver has a live one (record deleted by hand, or a container made before records): 409",
			true, true, buildTaken},
		{"the apiserver has none (the cache may be behind either way): go", true, false, buildGo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildAfterReserving(tc.asked, tc.apiLive); got != tc.want {
				t.Errorf("buildAfterReserving = %v, want %v", got, tc.want)
			}
		})
	}
}

// What a GET that missed the cache answers, from what the apiserver said, step by step.
func TestAnswerMiss(t *testing.T) {
	ours := func(r container.Record) miss { return miss{Record: answered, Rec: r, Ours: true} }
	listed := func(how lookup, live bool) miss {
		m := ours(rec(time.Minute))
		m.Deployments, m.Live = how, live
		return m
	}
	for _, tc := range []struct {
		name string
		m    miss
		want missAnswer
	}{
		{"nothing read yet: read the id's record", miss{}, missReadRecord},
		// Issue 23: a container without a record that the cache did not show yet got a 404.
		{"no record (a container of the reference provider, or its record deleted by hand): ask for the id's live Deployment",
			miss{Record: absent}, missListDeployments},
		{"no record, no live Deployment: 404, authoritative", miss{Record: absent, Deployments: answered}, missNotFound},
		{"no record, a live Deployment: this cache is behind, wait for it",
			miss{Record: absent, Deployments: answered, Live: true}, missWaitForCache},
		{"no record, and the Deployments cannot be listed: 503", miss{Record: absent, Deployments: failed}, missUnconfirmed},
		{"the apiserver cannot answer (outage, or over the confirmation limit): 503", miss{Record: failed}, missUnconfirmed},
		{"someone else's ConfigMap with the record's name: ask for the id's live Deployment",
			miss{Record: answered, Rec: rec(time.Minute), Ours: false}, missListDeployments},
		{"a record owing a DELETED (a DELETE happened): 404", ours(rec(time.Minute, owedRec)), missNotFound},
		{"a record owing a DELETED, being deleted: 404", ours(rec(time.Minute, owedRec, terminatingRec)), missNotFound},
		{"a record being deleted, owing nothing (by hand; the container may live): ask for the live Deployment",
			ours(rec(time.Minute, terminatingRec)), missListDeployments},
		{"a live record: ask for the id's live Deployment", ours(rec(time.Minute)), missListDeployments},
		{"a live record, no live Deployment (a create in progress, or deleted by hand a moment ago): 404",
			listed(answered, false), missNotFound},
		{"a live record and a live Deployment: this cache is behind, wait for it", listed(answered, true), missWaitForCache},
		{"a live record, and the Deployments cannot be listed: 503", listed(failed, false), missUnconfirmed},
		{"a live record, and listing answers NotFound: 503 like any failure", listed(absent, false), missUnconfirmed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := answerMiss(tc.m); got != tc.want {
				t.Errorf("answerMiss = %v, want %v", got, tc.want)
			}
		})
	}
}

// How EnsureRecord brings the record it found to say an incarnation and, when owed,
// DELETED owed.
func TestFixRecord(t *testing.T) {
	now := metav1.NewTime(t0)
	record := func(inc string, edit ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
		l := container.NewRecord("x", inc, false)
		l.UID = "r1"
		for _, e := range edit {
			e(l)
		}
		return l
	}
	owed := func(l *corev1.ConfigMap) { l.Finalizers = append(l.Finalizers, container.RecordFinalizer) }
	held := func(l *corev1.ConfigMap) { l.Finalizers = append(l.Finalizers, "example.com/keep") }
	deleting := func(l *corev1.ConfigMap) { l.DeletionTimestamp = &now }
	bare := func(l *corev1.ConfigMap) { // a reservation with the id's labels only
		l.Labels = map[string]string{container.LabelManagedBy: container.ManagedByValue, container.LabelInstanceID: "x"}
	}
	// write summarises what is written: the labels that differ from a record's, and the finalizers.
	write := func(w *corev1.ConfigMap) string {
		if w == nil {
			return "-"
		}
		return fmt.Sprintf("inc=%q record=%q finalizers=%v", w.Labels[container.LabelIncarnation], w.Labels[container.LabelRecord], w.Finalizers)
	}
	for _, tc := range []struct {
		name      string
		cur       *corev1.ConfigMap
		inc       string
		owed      bool
		wantWrite string
		wantBusy  bool
		foreign   bool
	}{
		{"as wanted: nothing", record("i1"), "i1", false, "-", false, false},
		{"owed as wanted: nothing", record("i1", owed), "i1", true, "-", false, false},
		{"owed, asked to say not owed: owed stays (only the status reporter deletes it)", record("i1", owed), "i1", false, "-", false, false},
		{"mark owed (DELETE, or the reporter saw it gone)", record("i1"), "i1", true,
			`inc="i1" record="container" finalizers=[dcm.project/deleted-report-owed]`, false, false},
		{"another incarnation (restored by a newer container): relabelled", record("i0"), "i1", false,
			`inc="i1" record="container" finalizers=[]`, false, false},
		{"another incarnation, owed: relabelled, still owed", record("i0", owed), "i1", false,
			`inc="i1" record="container" finalizers=[dcm.project/deleted-report-owed]`, false, false},
		{"a container without incarnation (the reference provider's): the label removed", record("i0"), "", false,
			`inc="" record="container" finalizers=[]`, false, false},
		{"a bare reservation: the record's labels added", record("", bare), "i1", false,
			`inc="i1" record="container" finalizers=[]`, false, false},
		{"the right incarnation, the record label missing: added", record("i1", func(l *corev1.ConfigMap) { delete(l.Labels, container.LabelRecord) }),
			"i1", false, `inc="i1" record="container" finalizers=[]`, false, false},
		{"someone else's finalizer is kept when marking owed", record("i1", held), "i1", true,
			`inc="i1" record="container" finalizers=[example.com/keep dcm.project/deleted-report-owed]`, false, false},
		{"being deleted, owed, owed wanted: it stays until the DELETED is delivered", record("i1", owed, deleting), "i1", true, "-", false, false},
		{"being deleted, owed, not wanted owed (the container lives): let go, retry", record("i1", owed, held, deleting), "i1", false,
			`inc="i1" record="container" finalizers=[example.com/keep]`, true, false},
		{"being deleted, not owed: retry (it goes, the retry creates it afresh)", record("i1", held, deleting), "i1", true, "-", true, false},
		{"being deleted, not owed, not wanted owed: retry", record("i1", held, deleting), "i1", false, "-", true, false},
		{"someone else's ConfigMap with the record's name: never touched", record("i1", func(l *corev1.ConfigMap) { l.Labels = map[string]string{"app": "theirs"} }),
			"i1", false, "-", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cur.DeepCopy()
			fix := fixRecord(tc.cur, "x", tc.inc, tc.owed)
			if got := write(fix.Write); got != tc.wantWrite || fix.Busy != tc.wantBusy || fix.Foreign != tc.foreign {
				t.Errorf("fixRecord: write %s busy %v foreign %v\nwant write %s busy %v foreign %v",
					got, fix.Busy, fix.Foreign, tc.wantWrite, tc.wantBusy, tc.foreign)
			}
			if !equality.Semantic.DeepEqual(before, tc.cur) {
				t.Error("the record read was changed")
			}
			if w := fix.Write; w != nil {
				if rec, ok := container.RecordOf(w, "x"); !ok || w.UID != "r1" || w.Labels[container.LabelInstanceID] != "x" {
					t.Errorf("the write is not the same record: %+v %v", rec, ok)
				}
			}
		})
	}
}

// What a DELETE does with what it found at the apiserver: its id's Deployments, Services
// and record.
func TestPlanDelete(t *testing.T) {
	dep := func(name, inc string, deleting bool) object {
		return object{Name: name, UID: types.UID("uid-" + name), Incarnation: inc, Deleting: deleting}
	}
	svc := func(name, inc string) object {
		return object{Name: name, UID: types.UID("uid-" + name), Incarnation: inc}
	}
	summary := func(d deletion) string {
		if d.InProgress {
			return "wait for the create"
		}
		var out []string
		if d.MarkOwed {
			out = append(out, fmt.Sprintf("mark owed %q", d.Incarnation))
		}
		for _, o := range d.Deployments {
			out = append(out, fmt.Sprintf("delete deployment %s (%s)", o.Name, o.UID))
		}
		for _, o := range d.Services {
			out = append(out, fmt.Sprintf("delete service %s (%s)", o.Name, o.UID))
		}
		if d.NotFound {
			return strings.Join(append(out, "404"), "; ")
		}
		return strings.Join(append(out, "204"), "; ")
	}
	const young, old = 5 * time.Second, 2 * createTimeout
	noRecord := func(deps, svcs []object) deleteFacts {
		return deleteFacts{Record: absent, Deployments: deps, Services: svcs}
	}
	withRecord := func(r container.Record, deps, svcs []object) deleteFacts {
		return deleteFacts{Record: answered, Rec: r, Ours: true, Deployments: deps, Services: svcs}
	}
	live := []object{dep("web", "i1", false)}
	for _, tc := range []struct {
		name string
		f    deleteFacts
		want string
	}{
		{"nothing: 404", noRecord(nil, nil), "404"},
		{"only a Deployment being deleted (a DELETE already happened): 404",
			noRecord([]object{dep("web", "i1", true)}, nil), "404"},
		{"a live container: marked owed, then everything deleted (UID preconditions)",
			withRecord(rec(young), live, []object{svc("web", "i1")}),
			`mark owed "i1"; delete deployment web (uid-web); delete service web (uid-web); 204`},
		{"a live container without a Service", withRecord(rec(old), live, nil),
			`mark owed "i1"; delete deployment web (uid-web); 204`},
		{"a live container without a record (deleted by hand, or the reference provider's): marked owed",
			noRecord(live, nil), `mark owed "i1"; delete deployment web (uid-web); 204`},
		{"a container without incarnation (the reference provider's): marked owed for none",
			noRecord([]object{dep("web", "", false)}, nil), `mark owed ""; delete deployment web (uid-web); 204`},
		{"the live one and an earlier one still being deleted: owed for the live one, both deleted",
			noRecord([]object{dep("old", "i0", true), dep("web", "i1", false)}, nil),
			`mark owed "i1"; delete deployment old (uid-old); delete deployment web (uid-web); 204`},
		{"only a Service left (a failed rollback, or a kubectl delete of the Deployment): deleted, no mark",
			noRecord(nil, []object{svc("web", "i1")}), "delete service web (uid-web); 204"},
		{"a Deployment being deleted and its Service: both deleted, no mark",
			noRecord([]object{dep("web", "i1", true)}, []object{svc("web", "i1")}),
			"delete deployment web (uid-web); delete service web (uid-web); 204"},
		// Issue 23: DELETE never read the record, and answered 404 (or deleted the Service
		// and answered 204) while a create of the id was still going to finish.
		{"a young live record, no Deployment: a create in progress, wait for it", withRecord(rec(young), nil, nil),
			"wait for the create"},
		{"a young live record and its Service, no Deployment: a create in progress (the Service comes first)",
			withRecord(rec(young), nil, []object{svc("web", "i1")}), "wait for the create"},
		{"a young live record, an earlier incarnation's Deployment being deleted: a create in progress",
			withRecord(rec(young), []object{dep("old", "i0", true)}, nil), "wait for the create"},
		{"a young live record, its own Deployment being deleted: no create in progress any more, 404",
			withRecord(rec(young), []object{dep("web", "i1", true)}, nil), "404"},
		// Never the record itself (chaos seed 114630519: it may be a container deleted by
		// hand whose DELETED is not sent yet): marked owed, for the reporter.
		{"an old live record, an earlier Deployment being deleted, no Service: abandoned or deleted by hand: marked owed, 204",
			withRecord(rec(old), []object{dep("old", "i0", true)}, nil), `mark owed "i1"; delete deployment old (uid-old); 204`},
		{"a record just under twice the create timeout: still in progress",
			withRecord(rec(old-time.Nanosecond), nil, nil), "wait for the create"},
		{"an old live record, nothing else: marked owed, 204",
			withRecord(rec(old), nil, nil), `mark owed "i1"; 204`},
		{"an old live record and its Service: marked owed, the Service deleted, 204",
			withRecord(rec(old), nil, []object{svc("web", "i1")}), `mark owed "i1"; delete service web (uid-web); 204`},
		{"a young record owing a DELETED (deleted already): not a create, 404", withRecord(rec(young, owedRec), nil, nil), "404"},
		{"a young record owing a DELETED and a Service left: the Service deleted",
			withRecord(rec(young, owedRec), nil, []object{svc("web", "i1")}), "delete service web (uid-web); 204"},
		{"a young record being deleted (a rollback): not a create in progress, 404",
			withRecord(rec(young, terminatingRec), nil, nil), "404"},
		{"someone else's ConfigMap with the record's name: not a create, 404",
			deleteFacts{Record: answered, Rec: rec(young), Ours: false}, "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summary(planDelete(tc.f, t0, createTimeout)); got != tc.want {
				t.Errorf("planDelete:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// How long a DELETE waits for a create of its id in progress, and the Retry-After of
// its 409 past that.
func TestCreateWaitBound(t *testing.T) {
	for _, tc := range []struct {
		age        time.Duration
		wait       time.Duration
		retryAfter int
	}{
		{0, createTimeout, 20},                          // until the create's deadline; abandoned 20 s later
		{5 * time.Second, 15 * time.Second, 20},         // the same deadline
		{createTimeout, 0, 20},                          // past its deadline: no wait
		{30 * time.Second, 0, 10},                       // rolling back: back when abandoned
		{2*createTimeout - time.Millisecond, 0, 1},      // never less than 1 s
		{-time.Minute, createTimeout + time.Minute, 20}, // a record "from the future" (clock skew)
		{createTimeout - 1500*time.Millisecond, 1500 * time.Millisecond, 20},
	} {
		wait, ra := createWaitBound(t0.Add(-tc.age), t0, createTimeout)
		if wait != tc.wait || ra != tc.retryAfter {
			t.Errorf("age %s: wait %s, Retry-After %d; want %s, %d", tc.age, wait, ra, tc.wait, tc.retryAfter)
		}
	}
}

// Which client a DELETE reads through: the rate-limited Confirm client only while
// nothing of the id is known (issue 23: DELETEs of unknown ids cost LISTs on the main
// client and slowed real creates).
func TestConfirmDeleteReads(t *testing.T) {
	for _, tc := range []struct {
		cacheShowsAny, found, want bool
	}{
		{false, false, true}, // an unknown id: the Confirm client
		{false, true, false}, // a read found something: the main client from then on
		{true, false, false}, // the cache knows the id: the main client
		{true, true, false},
	} {
		if got := confirmDeleteReads(tc.cacheShowsAny, tc.found); got != tc.want {
			t.Errorf("cache shows any %v, found %v: confirm %v, want %v", tc.cacheShowsAny, tc.found, got, tc.want)
		}
	}
}

// What the uninstall writes before deleting a record: decided on the record as it is
// now, not as it was listed (issue 23).
func TestReleaseWrite(t *testing.T) {
	record := func(uid types.UID, fin ...string) *corev1.ConfigMap {
		l := container.NewRecord("x", "i1", false)
		l.UID, l.Finalizers = uid, fin
		return l
	}
	for _, tc := range []struct {
		name string
		cur  *corev1.ConfigMap
		want string // the finalizers written, or "-"
	}{
		{"owed now (marked since it was listed): the finalizer off", record("r1", container.RecordFinalizer), "[]"},
		{"owed now, someone else's finalizer kept", record("r1", "example.com/keep", container.RecordFinalizer), "[example.com/keep]"},
		{"not owed now (delivered since it was listed): nothing to write", record("r1"), "-"},
		{"another record of the id by now: never touched", record("r2", container.RecordFinalizer), "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := "-"
			if w := releaseWrite(tc.cur, "r1"); w != nil {
				got = fmt.Sprint(w.Finalizers)
			}
			if got != tc.want {
				t.Errorf("releaseWrite wrote %s, want %s", got, tc.want)
			}
		})
	}
}

// Issue 23: a record deleted between EnsureRecord's create (AlreadyExists) and its read
// was not created again, and a DELETE marking it owed answered 500.
func TestRecreateRecord(t *testing.T) {
	for attempt, want := range map[int]bool{1: true, ensureAttempts - 1: true, ensureAttempts: false} {
		if got := recreateRecord(attempt); got != want {
			t.Errorf("attempt %d: create again %v, want %v", attempt, got, want)
		}
	}
}

func TestReserveWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const w = 5 * time.Second
	for _, tc := range []struct {
		name     string
		reserved time.Duration // after the create began
		keep     bool
	}{
		{"reserved at once", 10 * time.Millisecond, true},
		{"reserved at the window's end", w, true},
		{"reserved after it: a DELETE may have answered 404 since", w + time.Millisecond, false},
	} {
		if got := reservedInTime(t0, t0.Add(tc.reserved), w); got != tc.keep {
			t.Errorf("reservedInTime, %s: %v, want %v", tc.name, got, tc.keep)
		}
	}
	for _, tc := range []struct {
		name    string
		elapsed time.Duration // since the DELETE began
		want    time.Duration
	}{
		{"found nothing at once: waits the rest of the window", 200 * time.Millisecond, w - 200*time.Millisecond},
		{"the window has passed: answers now", w, 0},
		{"long past it", time.Minute, 0},
	} {
		if got := lateCreateWait(t0, t0.Add(tc.elapsed), w); got != tc.want {
			t.Errorf("lateCreateWait, %s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestUnmarkAfterFailedDelete(t *testing.T) {
	owed := container.Record{Incarnation: "i1", Owed: true}
	for _, tc := range []struct {
		name string
		rec  container.Record
		inc  string
		live bool
		want bool
	}{
		{"its mark on a container still running: undone", owed, "i1", true, true},
		{"the container is gone meanwhile: its DELETED is due", owed, "i1", false, false},
		{"the mark was never written", container.Record{Incarnation: "i1"}, "i1", true, false},
		{"another incarnation's record", owed, "i2", true, false},
		{"being deleted", container.Record{Incarnation: "i1", Owed: true, Terminating: true}, "i1", true, false},
	} {
		if got := unmarkAfterFailedDelete(tc.rec, tc.inc, tc.live); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
