package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const createTimeout = 20 * time.Second

func TestTakeOverAllowed(t *testing.T) {
	for _, tc := range []struct {
		age  time.Duration
		want bool
	}{
		{0, false}, {20 * time.Second, false}, {39 * time.Second, false}, {40 * time.Second, true}, {time.Hour, true},
		{-time.Second, false}, // clock skew: a reservation "from the future" is young
	} {
		if got := takeOverAllowed(t0, t0.Add(tc.age), createTimeout); got != tc.want {
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

// What a create does about the Lease holding its id, step by step: each row is one
// decision, with what the create knows by then.
func TestClaimID(t *testing.T) {
	const old, young = time.Hour, 5 * time.Second
	read := func(r container.Record) holder { return holder{Lease: answered, Record: r, Ours: true} }
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
		{"second AlreadyExists (after a retry or a take-over): another create got there first",
			holder{Retried: true}, claimTaken},
		{"the Lease went before it could be read (free): create again", holder{Lease: absent}, claimRetry},
		{"someone else's Lease with the record's name: taken, never touched, however old",
			holder{Lease: answered, Record: rec(old), Ours: false}, claimTaken},
		{"a record owing a DELETED: taken until it is delivered", read(rec(old, owedRec)), claimTaken},
		{"a young record: a create may still be in flight", read(rec(young)), claimTaken},
		{"a record just under twice the create timeout: still young", read(rec(2*createTimeout - time.Nanosecond)), claimTaken},
		{"a record from the future (clock skew): young", read(rec(-time.Minute)), claimTaken},
		{"an old record of ours owing nothing: ask whether a Deployment carries the id",
			read(rec(old)), claimListDeployments},
		{"old, but a Deployment carries the id (live, or being deleted): taken", listed(rec(old), 1), claimTaken},
		{"old, no Deployment: abandoned by a provider that died mid-create, taken over",
			listed(rec(old), 0), claimTakeOver},
		{"old, of another incarnation, no Deployment: abandoned like any (the incarnation is not looked at)",
			listed(rec(old, func(r *container.Record) { r.Incarnation = "i0" }), 0), claimTakeOver},
		{"old, being deleted, not owed, no Deployment: taken over like any (its state is not looked at)",
			listed(rec(old, terminatingRec), 0), claimTakeOver},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimID(tc.h, t0, createTimeout); got != tc.want {
				t.Errorf("claimID = %v, want %v", got, tc.want)
			}
		})
	}
}

// Whether a create, its id reserved, makes the workload: the cache may know a Deployment
// of the id that has no record, or one that is gone already.
func TestBuildAfterReserving(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		cachedLive, asked, apiLive bool
		want                       build
	}{
		{"the cache shows no live Deployment: go (no request)", false, false, false, buildGo},
		{"the cache shows one: ask the apiserver", true, false, false, buildAskAPIServer},
		{"the apiserver has one too (record deleted by hand, or a container made before records): 409",
			true, true, true, buildTaken},
		{"the apiserver has none (the cache is behind, e.g. after an apiserver outage): go", true, true, false, buildGo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildAfterReserving(tc.cachedLive, tc.asked, tc.apiLive); got != tc.want {
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
		{"no record: 404, authoritative", miss{Record: absent}, missNotFound},
		{"the apiserver cannot answer (outage, or over the confirmation limit): 503", miss{Record: failed}, missUnconfirmed},
		{"someone else's Lease with the record's name: 404", miss{Record: answered, Rec: rec(time.Minute), Ours: false}, missNotFound},
		{"a record owing a DELETED (a DELETE happened): 404", ours(rec(time.Minute, owedRec)), missNotFound},
		{"a record being deleted: 404", ours(rec(time.Minute, terminatingRec)), missNotFound},
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

// How EnsureRecord brings the Lease it found to say an incarnation and, when owed,
// DELETED owed.
func TestFixRecord(t *testing.T) {
	now := metav1.NewTime(t0)
	lease := func(inc string, edit ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
		l := container.NewRecord("x", inc, false)
		l.UID = "r1"
		for _, e := range edit {
			e(l)
		}
		return l
	}
	owed := func(l *coordinationv1.Lease) { l.Finalizers = append(l.Finalizers, container.RecordFinalizer) }
	held := func(l *coordinationv1.Lease) { l.Finalizers = append(l.Finalizers, "example.com/keep") }
	deleting := func(l *coordinationv1.Lease) { l.DeletionTimestamp = &now }
	bare := func(l *coordinationv1.Lease) { // a reservation with the id's labels only
		l.Labels = map[string]string{container.LabelManagedBy: container.ManagedByValue, container.LabelInstanceID: "x"}
	}
	// write summarises what is written: the labels that differ from a record's, and the finalizers.
	write := func(w *coordinationv1.Lease) string {
		if w == nil {
			return "-"
		}
		return fmt.Sprintf("inc=%q record=%q finalizers=%v", w.Labels[container.LabelIncarnation], w.Labels[container.LabelRecord], w.Finalizers)
	}
	for _, tc := range []struct {
		name      string
		cur       *coordinationv1.Lease
		inc       string
		owed      bool
		wantWrite string
		wantBusy  bool
		foreign   bool
	}{
		{"as wanted: nothing", lease("i1"), "i1", false, "-", false, false},
		{"owed as wanted: nothing", lease("i1", owed), "i1", true, "-", false, false},
		{"owed, asked to say not owed: owed stays (only the status reporter deletes it)", lease("i1", owed), "i1", false, "-", false, false},
		{"mark owed (DELETE, or the reporter saw it gone)", lease("i1"), "i1", true,
			`inc="i1" record="container" finalizers=[dcm.project/deleted-report-owed]`, false, false},
		{"another incarnation (restored by a newer container): relabelled", lease("i0"), "i1", false,
			`inc="i1" record="container" finalizers=[]`, false, false},
		{"another incarnation, owed: relabelled, still owed", lease("i0", owed), "i1", false,
			`inc="i1" record="container" finalizers=[dcm.project/deleted-report-owed]`, false, false},
		{"a container without incarnation (the reference provider's): the label removed", lease("i0"), "", false,
			`inc="" record="container" finalizers=[]`, false, false},
		{"a bare reservation: the record's labels added", lease("", bare), "i1", false,
			`inc="i1" record="container" finalizers=[]`, false, false},
		{"the right incarnation, the record label missing: added", lease("i1", func(l *coordinationv1.Lease) { delete(l.Labels, container.LabelRecord) }),
			"i1", false, `inc="i1" record="container" finalizers=[]`, false, false},
		{"someone else's finalizer is kept when marking owed", lease("i1", held), "i1", true,
			`inc="i1" record="container" finalizers=[example.com/keep dcm.project/deleted-report-owed]`, false, false},
		{"being deleted, owed, owed wanted: it stays until the DELETED is delivered", lease("i1", owed, deleting), "i1", true, "-", false, false},
		{"being deleted, owed, not wanted owed (the container lives): let go, retry", lease("i1", owed, held, deleting), "i1", false,
			`inc="i1" record="container" finalizers=[example.com/keep]`, true, false},
		{"being deleted, not owed: retry (it goes, the retry creates it afresh)", lease("i1", held, deleting), "i1", true, "-", true, false},
		{"being deleted, not owed, not wanted owed: retry", lease("i1", held, deleting), "i1", false, "-", true, false},
		{"someone else's Lease with the record's name: never touched", lease("i1", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"app": "theirs"} }),
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
				t.Error("the Lease read was changed")
			}
			if w := fix.Write; w != nil {
				if rec, ok := container.RecordOf(w, "x"); !ok || w.UID != "r1" || w.Labels[container.LabelInstanceID] != "x" {
					t.Errorf("the write is not the same record: %+v %v", rec, ok)
				}
			}
		})
	}
}

// What a DELETE does with the objects of its id found at the apiserver.
func TestPlanDelete(t *testing.T) {
	now := metav1.NewTime(t0)
	dep := func(name, inc string, deleting bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: now}}
		if inc != "" {
			d.Labels = map[string]string{container.LabelIncarnation: inc}
		}
		if deleting {
			d.DeletionTimestamp = &now
		}
		return d
	}
	summary := func(d deletion) string {
		if d.NotFound {
			return "404"
		}
		var out []string
		if d.MarkOwed {
			out = append(out, fmt.Sprintf("mark owed %q", d.Incarnation))
		}
		for _, n := range d.Deployments {
			out = append(out, "delete deployment "+n)
		}
		for _, n := range d.Services {
			out = append(out, "delete service "+n)
		}
		return strings.Join(out, "; ") + "; 204"
	}
	for _, tc := range []struct {
		name string
		deps []*appsv1.Deployment
		svcs []string
		want string
	}{
		{"nothing: 404", nil, nil, "404"},
		{"only a Deployment being deleted (a DELETE already happened): 404", []*appsv1.Deployment{dep("web", "i1", true)}, nil, "404"},
		{"a live container: marked owed, then everything deleted",
			[]*appsv1.Deployment{dep("web", "i1", false)}, []string{"web"},
			`mark owed "i1"; delete deployment web; delete service web; 204`},
		{"a live container without a Service", []*appsv1.Deployment{dep("web", "i1", false)}, nil,
			`mark owed "i1"; delete deployment web; 204`},
		{"a container without incarnation (the reference provider's): marked owed for none",
			[]*appsv1.Deployment{dep("web", "", false)}, nil, `mark owed ""; delete deployment web; 204`},
		{"the live one and an earlier one still being deleted: owed for the live one, both deleted",
			[]*appsv1.Deployment{dep("old", "i0", true), dep("web", "i1", false)}, nil,
			`mark owed "i1"; delete deployment old; delete deployment web; 204`},
		{"only a Service left (a failed rollback, or a kubectl delete of the Deployment): deleted, no mark",
			nil, []string{"web"}, "delete service web; 204"},
		{"a Deployment being deleted and its Service: both deleted, no mark",
			[]*appsv1.Deployment{dep("web", "i1", true)}, []string{"web"},
			"delete deployment web; delete service web; 204"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps := make([]appsv1.Deployment, len(tc.deps))
			for i, d := range tc.deps {
				deps[i] = *d
			}
			if got := summary(planDelete(container.DeploymentsOf(deps), tc.svcs)); got != tc.want {
				t.Errorf("planDelete:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
