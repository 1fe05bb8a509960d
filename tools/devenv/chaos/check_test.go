package chaos

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Hand-made histories, one breach (or one allowed near-breach) each: every invariant
// must flag what it promises to flag and nothing else.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// op is an operation answered with code (0 with refused: connection refused).
func op(kind, via, id string, start, end float64, code int) Entry {
	return Entry{Type: "op", Kind: kind, Via: via, ID: id, Start: at(start), End: at(end), Code: code, Proc: via + "-1"}
}

func ev(id, status string, t float64) Event {
	return Event{ID: id, Status: status, Time: at(t), Message: status}
}

func dep(id, inc, image, rev string) Object {
	return Object{Name: id + "-dep", ID: id, Incarnation: inc, Image: image, Revision: rev}
}

// live is a settled container at rest: its Deployment, record, Service and pod.
func live(f *Final, id, inc string) {
	f.Deployments = append(f.Deployments, dep(id, inc, normalImage, "1"))
	f.Records = append(f.Records, Object{Name: "dcm-container-" + id, ID: id, Incarnation: inc, Finalizers: []string{"dcm.project/deleted-report-owed"}})
	f.Services = append(f.Services, Object{Name: id + "-svc", ID: id, Incarnation: inc})
	f.Pods = append(f.Pods, Object{Name: id + "-pod", ID: id, Incarnation: inc, Phase: "Running", Ready: true, Image: normalImage})
}

// build numbers the history (Seq) and the stream (Seq), as a run would.
func build(h []Entry, evs []Event, f Final) Input {
	for i := range h {
		h[i].Seq = i + 1
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
	}
	f.Quiesced, f.Leaders, f.Time = true, 1, at(1000)
	if f.Registry == nil {
		f.Registry = map[string]string{}
	}
	return Input{Run: RunInfo{Started: t0}, History: h, Events: evs, Final: f}
}

func violationsOf(t *testing.T, in Input, name string) []Violation {
	t.Helper()
	for _, r := range Check(in) {
		if r.Name == name {
			return r.Violations
		}
	}
	t.Fatalf("no invariant %q", name)
	return nil
}

type row struct {
	name   string
	h      []Entry
	evs    []Event
	final  func(*Final)
	breach bool
}

func runRows(t *testing.T, invariant string, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var f Final
			if r.final != nil {
				r.final(&f)
			}
			vs := violationsOf(t, build(r.h, r.evs, f), invariant)
			if got := len(vs) > 0; got != r.breach {
				t.Errorf("%s: breach %v, want %v: %+v", invariant, got, r.breach, vs)
			}
		})
	}
}

func TestOneContainerPerID(t *testing.T) {
	runRows(t, "one container per id", []row{
		{name: "second create after the first's DELETED",
			h:   []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "b", "x", 2, 3, 204), op(OpCreate, "b", "x", 5, 6, 201)},
			evs: []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5), ev("x", "RUNNING", 6.5)}},
		{name: "two 201s with no DELETED between (the DELETE answered, its event never came)",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "b", "x", 2, 3, 204), op(OpCreate, "b", "x", 5, 6, 201)},
			evs:    []Event{ev("x", "RUNNING", 1.5), ev("x", "RUNNING", 6.5)},
			breach: true},
		{name: "a concurrent race both won",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpCreate, "b", "x", 0, 1.1, 201)},
			breach: true},
		{name: "a race one won",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpCreate, "b", "x", 0, 1.1, 409)}},
		{name: "two Deployments of one id at rest",
			final: func(f *Final) {
				live(f, "x", "i1")
				f.Deployments = append(f.Deployments, dep("x", "i2", normalImage, "1"))
			},
			breach: true},
	})
}

func TestDuplicatesGet409(t *testing.T) {
	apiserverDown := Entry{Type: "fault", Kind: FaultAPIServerRestart, Start: at(1.5), End: at(4)}
	runRows(t, "duplicate creates get 409", []row{
		{name: "duplicate answered 409",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpCreate, "b", "x", 2, 3, 409)}},
		{name: "duplicate answered 400",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpCreate, "b", "x", 2, 3, 400)},
			breach: true},
		{name: "duplicate answered 503 outside any outage",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpCreate, "b", "x", 2, 3, 503)},
			breach: true},
		{name: "duplicate answered 503 while the apiserver was down",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), apiserverDown, op(OpCreate, "b", "x", 2, 3, 503)}},
		{name: "duplicate to a stopped replica: no answer",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), func() Entry { e := op(OpCreate, "b", "x", 2, 3, 0); e.Refused = true; return e }()}},
		{name: "still taken while its DELETED is owed (deleted, not reported)",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 1.5, 1.6, 204), op(OpCreate, "b", "x", 2, 3, 409)}},
		{name: "409 for an id never created",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 409)},
			breach: true},
		{name: "409 for an id whose container was reported DELETED long before",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), op(OpCreate, "b", "x", 10, 11, 409)},
			evs:    []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5)},
			breach: true},
		{name: "409 just after the DELETED (record released a moment later)",
			h:   []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), op(OpCreate, "b", "x", 4, 5, 409)},
			evs: []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5)}},
		{name: "409 after a create with no definite answer (it may hold the id)",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 503), op(OpCreate, "b", "x", 10, 11, 409)}},
		{name: "409 racing a create that won",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpCreate, "b", "x", 0.1, 1.2, 409)}},
	})
}

func TestNotFoundOnlyWhenAbsent(t *testing.T) {
	runRows(t, "404 only for absent containers", []row{
		{name: "GET on the other replica after 201 answered 404",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpGet, "b", "x", 1.01, 1.02, 404)},
			breach: true},
		{name: "DELETE answered 404 for a live container",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "b", "x", 5, 6, 404)},
			breach: true},
		{name: "404 after a delete",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), op(OpGet, "b", "x", 4, 5, 404)}},
		{name: "404 racing a delete",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), op(OpDelete, "b", "x", 2, 3, 404)}},
		{name: "404 after a hand delete",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), func() Entry { e := op(OpHandDelete, "kubectl", "x", 2, 2.1, 0); e.Count = 1; return e }(), op(OpGet, "b", "x", 4, 5, 404)}},
		{name: "404 while the create was still unanswered",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpGet, "b", "x", 0.5, 0.6, 404)}},
	})
}

func TestExistenceMatchesHistory(t *testing.T) {
	runRows(t, "no container lost or resurrected", []row{
		{name: "created, never deleted, live", h: []Entry{op(OpCreate, "a", "x", 0, 1, 201)},
			final: func(f *Final) { live(f, "x", "i1") }},
		{name: "created, never deleted, gone", h: []Entry{op(OpCreate, "a", "x", 0, 1, 201)}, breach: true},
		{name: "deleted, no create after, live",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "b", "x", 2, 3, 204)},
			final:  func(f *Final) { live(f, "x", "i1") },
			breach: true},
		{name: "delete without a definite answer, gone",
			h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "b", "x", 2, 3, 503)}},
		{name: "deleted, then a create that may have worked, live",
			h:     []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "b", "x", 2, 3, 204), op(OpCreate, "registry", "x", 4, 5, 422)},
			final: func(f *Final) { live(f, "x", "i2") }},
	})
}

func TestLastEventIsTruth(t *testing.T) {
	pull := fateImages[2]
	runRows(t, "last event is the final state", []row{
		{name: "live and RUNNING", h: []Entry{op(OpCreate, "a", "x", 0, 1, 201)}, evs: []Event{ev("x", "PENDING", 1), ev("x", "RUNNING", 2)},
			final: func(f *Final) { live(f, "x", "i1") }},
		{name: "live, last event PENDING", h: []Entry{op(OpCreate, "a", "x", 0, 1, 201)}, evs: []Event{ev("x", "RUNNING", 1), ev("x", "PENDING", 2)},
			final: func(f *Final) { live(f, "x", "i1") }, breach: true},
		{name: "gone, last event RUNNING (DELETED lost)", h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204)},
			evs: []Event{ev("x", "RUNNING", 1.5)}, breach: true},
		{name: "created and gone with no event at all", h: []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204)}, breach: true},
		{name: "never created: nothing owed", h: []Entry{op(OpCreate, "a", "x", 0, 1, 400)}},
		{name: "image that cannot be pulled stays PENDING", evs: []Event{ev("x", "PENDING", 1)},
			final: func(f *Final) { live(f, "x", "i1"); f.Deployments[0].Image = pull }},
		{name: "image changed to one that cannot be pulled: the old pod runs", evs: []Event{ev("x", "RUNNING", 1)},
			final: func(f *Final) { live(f, "x", "i1"); f.Deployments[0].Image, f.Deployments[0].Revision = pull, "2" }},
	})
}

func TestStreamAgreesWithAPI(t *testing.T) {
	runRows(t, "the stream agrees with the API", []row{
		{name: "agree", evs: []Event{ev("x", "RUNNING", 1)},
			final: func(f *Final) {
				live(f, "x", "i1")
				f.Views = map[string]map[string]APIView{"a-1": {"x": {Status: "RUNNING", Message: "RUNNING"}}}
			}},
		{name: "a replica lists a gone container", evs: []Event{ev("x", "DELETED", 1)},
			final: func(f *Final) {
				f.Views = map[string]map[string]APIView{"a-1": {"x": {Status: "RUNNING", Message: "RUNNING"}}}
			}, breach: true},
		{name: "message never delivered", evs: []Event{ev("x", "RUNNING", 1)},
			final: func(f *Final) {
				live(f, "x", "i1")
				f.Views = map[string]map[string]APIView{"a-1": {"x": {Status: "RUNNING", Message: "CrashLoopBackOff"}}}
			}, breach: true},
	})
}

func TestNothingAfterDeleted(t *testing.T) {
	runRows(t, "nothing after DELETED", []row{
		{name: "a late RUNNING of the deleted container",
			h:      []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204)},
			evs:    []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5), ev("x", "RUNNING", 4)},
			breach: true},
		{name: "a new container after the DELETED",
			h:   []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), op(OpCreate, "b", "x", 5, 6, 201)},
			evs: []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5), ev("x", "PENDING", 6.5)}},
		{name: "a create waiting for the id, answered after the DELETED",
			h:   []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), op(OpCreate, "b", "x", 2.5, 4, 201)},
			evs: []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5), ev("x", "PENDING", 4.5)}},
		{name: "DELETED twice is fine",
			h:   []Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204)},
			evs: []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5), ev("x", "DELETED", 4)}},
	})
}

func TestRegistryIsTruth(t *testing.T) {
	runRows(t, "the registry's view is the truth", []row{
		{name: "registry follows the container",
			h:     []Entry{op(OpCreate, "registry", "x", 0, 1, 201)},
			final: func(f *Final) { live(f, "x", "i1"); f.Registry = map[string]string{"x": "RUNNING"} }},
		{name: "registry still says RUNNING for a deleted container",
			h:      []Entry{op(OpCreate, "registry", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204)},
			final:  func(f *Final) { f.Registry = map[string]string{"x": "RUNNING"} },
			breach: true},
		{name: "registry says DELETED for a container deleted behind its back",
			h:     []Entry{op(OpCreate, "registry", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204)},
			final: func(f *Final) { f.Registry = map[string]string{"x": "DELETED"} }},
		{name: "registry lost an instance",
			h:      []Entry{op(OpCreate, "registry", "x", 0, 1, 201)},
			final:  func(f *Final) { live(f, "x", "i1") },
			breach: true},
		{name: "an older event redelivered to the registry after a NATS restart",
			h:     []Entry{op(OpCreate, "registry", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), {Type: "fault", Kind: FaultNATSRestart, Start: at(1.6), End: at(2.5)}},
			evs:   []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5)},
			final: func(f *Final) { f.Registry = map[string]string{"x": "RUNNING"} }},
		{name: "the same with no NATS restart near the older event",
			h:      []Entry{op(OpCreate, "registry", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204), {Type: "fault", Kind: FaultNATSRestart, Start: at(40), End: at(41)}},
			evs:    []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 3.5)},
			final:  func(f *Final) { f.Registry = map[string]string{"x": "RUNNING"} },
			breach: true},
		{name: "deleted through the registry: gone from it",
			h: []Entry{op(OpCreate, "registry", "x", 0, 1, 201), op(OpDelete, "registry", "x", 2, 3, 204)}},
	})
}

func TestNoServerErrors(t *testing.T) {
	starting := []Entry{
		{Type: "proc", Kind: "started", Proc: "b-2", Start: at(1)},
		{Type: "proc", Kind: "ready", Proc: "b-2", Start: at(1), End: at(3)},
	}
	runRows(t, "no 5xx but 503 in an apiserver outage", []row{
		{name: "500", h: []Entry{op(OpGet, "a", "x", 0, 1, 500)}, breach: true},
		{name: "503 with nothing down", h: []Entry{op(OpList, "a", "", 0, 1, 503)}, breach: true},
		{name: "503 from a replica still loading its caches",
			h: append(starting, func() Entry { e := op(OpCreate, "b", "x", 2, 2.1, 503); e.Proc = "b-2"; return e }())},
		{name: "503 from that replica once ready",
			h:      append(starting, func() Entry { e := op(OpCreate, "b", "x", 4, 4.1, 503); e.Proc = "b-2"; return e }()),
			breach: true},
		{name: "503 within the grace after the apiserver came back",
			h: []Entry{{Type: "fault", Kind: FaultAPIServerRestart, Start: at(0), End: at(5)}, op(OpDelete, "a", "x", 20, 21, 503)}},
		{name: "the registry's 5xx are not ours", h: []Entry{op(OpCreate, "registry", "x", 0, 1, 500)}},
	})
}

func TestNoPanicsOrCrashes(t *testing.T) {
	runRows(t, "no panic, no crash", []row{
		{name: "clean", h: []Entry{{Type: "proc", Kind: "killed", Proc: "a-1"}}},
		{name: "panic in a log", final: func(f *Final) { f.Panics = map[string][]string{"service-a-1.log": {"panic: boom"}} }, breach: true},
		{name: "a replica died by itself", h: []Entry{{Type: "proc", Kind: "exited", Proc: "a-1", Err: "exit status 2"}}, breach: true},
	})
}

func TestNoOrphans(t *testing.T) {
	runRows(t, "no orphans", []row{
		{name: "clean", final: func(f *Final) { live(f, "x", "i1") }},
		{name: "a Service left behind", final: func(f *Final) {
			f.Services = append(f.Services, Object{Name: "gone-svc", ID: "gone", Incarnation: "i9"})
		}, breach: true},
		{name: "a pod of an earlier incarnation", final: func(f *Final) {
			live(f, "x", "i2")
			f.Pods = append(f.Pods, Object{Name: "old-pod", ID: "x", Incarnation: "i1", Phase: "Running"})
		}, breach: true},
		{name: "a record still owing DELETED", final: func(f *Final) {
			f.Records = append(f.Records, Object{Name: "dcm-container-y", ID: "y", Deleting: true, Finalizers: []string{"dcm.project/deleted-report-owed"}})
		}, breach: true},
		{name: "a live record without its finalizer (a DELETED could be lost)", final: func(f *Final) {
			live(f, "x", "i1")
			f.Records[0].Finalizers = nil
		}, breach: true},
		{name: "a Deployment held by a finalizer", final: func(f *Final) {
			live(f, "x", "i1")
			f.Deployments[0].Finalizers = []string{"dcm.project/status-reported"}
		}, breach: true},
		{name: "a Deployment without its record", final: func(f *Final) {
			live(f, "x", "i1")
			f.Records = nil
		}, breach: true},
	})
}

func TestNoGrowth(t *testing.T) {
	sample := func(proc string, s, goroutines, rssMiB float64) Entry {
		return Entry{Type: "metrics", Proc: proc, Start: at(s), Goroutines: goroutines, RSS: rssMiB * (1 << 20)}
	}
	ready := Entry{Type: "proc", Kind: "ready", Proc: "a-1", Start: at(0), End: at(0)}
	runRows(t, "no goroutine or memory growth", []row{
		{name: "steady", h: []Entry{ready, sample("a-1", 10, 60, 40), sample("a-1", 20, 70, 45), sample("a-1", 120, 75, 50)}},
		{name: "goroutines leak", h: []Entry{ready, sample("a-1", 20, 60, 40), sample("a-1", 120, 400, 45)}, breach: true},
		{name: "memory grows", h: []Entry{ready, sample("a-1", 20, 60, 40), sample("a-1", 120, 60, 200)}, breach: true},
		{name: "too short a life to judge", h: []Entry{ready, sample("a-1", 20, 60, 40), sample("a-1", 50, 400, 400)}},
		// Seed 350101: a follower's 35, the leader's 75 at rest; as the leader it went
		// from 78 to 75.
		{name: "became the leader: compared as the leader", h: []Entry{ready, sample("a-1", 20, 35, 43),
			lead(sample("a-1", 100, 78, 47)), lead(sample("a-1", 180, 75, 47))}},
		{name: "a leak as the leader", h: []Entry{ready, sample("a-1", 20, 35, 43),
			lead(sample("a-1", 100, 78, 47)), lead(sample("a-1", 180, 400, 47))}, breach: true},
		{name: "the leader too briefly to judge as one: the first warm sample", h: []Entry{ready, sample("a-1", 20, 35, 43),
			lead(sample("a-1", 150, 78, 47)), lead(sample("a-1", 180, 75, 47))}, breach: true},
	})
}

// lead marks a metrics sample as the leader's.
func lead(e Entry) Entry {
	e.Leader = 1
	return e
}

func TestRecoveries(t *testing.T) {
	rec := func(kind string, d float64, err string) Entry {
		return Entry{Type: "recovery", Kind: kind, Start: at(0), End: at(d), Err: err}
	}
	h := []Entry{rec(FaultNATSRestart, 1, ""), rec(FaultNATSRestart, 3, ""), rec(FaultPodDelete, 0.5, ""), rec(FaultLeaderKill, 120, "statuses still undelivered: x")}
	got := Recoveries(h)
	if got[0].Kind != "all" || got[0].N != 3 || got[0].Never != 1 || got[0].P50 != time.Second || got[0].Max != 3*time.Second {
		t.Errorf("all: %+v", got[0])
	}
	i := slices.IndexFunc(got, func(r Recovery) bool { return r.Kind == FaultNATSRestart })
	if got[i].N != 2 || got[i].P50 != time.Second || got[i].P99 != 3*time.Second {
		t.Errorf("nats: %+v", got[i])
	}
	runRows(t, "every fault recovered", []row{
		{name: "recovered", h: h[:3]},
		{name: "one never recovered", h: h, breach: true},
	})
}

func TestCameToRestAndOneLeader(t *testing.T) {
	in := build(nil, nil, Final{})
	in.Final.Quiesced, in.Final.Unsettled, in.Final.Leaders = false, []string{"2 leaders"}, 2
	if len(violationsOf(t, in, "the world came to rest")) != 1 || len(violationsOf(t, in, "one publisher at rest")) != 1 {
		t.Error("an unsettled world with two leaders must fail both")
	}
}

// A violation shows the history and the stream of its container, in time order.
func TestViolationExcerpt(t *testing.T) {
	in := build([]Entry{op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "b", "x", 2, 3, 204), op(OpCreate, "a", "y", 0, 1, 201)},
		[]Event{ev("x", "RUNNING", 1.5), ev("y", "DELETED", 1.2)}, Final{})
	vs := violationsOf(t, in, "last event is the final state")
	if len(vs) != 1 || vs[0].ID != "x" {
		t.Fatalf("%+v", vs)
	}
	text := strings.Join(vs[0].Excerpt, "\n")
	for _, want := range []string{"#1 create x via a (a-1)", "-> 201", "event seq 1 x RUNNING", "#2 delete x via b (b-1)", "-> 204"} {
		if !strings.Contains(text, want) {
			t.Errorf("excerpt lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, " y ") || strings.Index(text, "#1 create") > strings.Index(text, "event seq 1") {
		t.Errorf("excerpt has another id or is out of order:\n%s", text)
	}
}

func TestPlanIsSeeded(t *testing.T) {
	a, b := Plan(7, 2*time.Minute), Plan(7, 2*time.Minute)
	if !slices.EqualFunc(a, b, func(x, y Step) bool {
		return x.At == y.At && x.Kind == y.Kind && x.ID == y.ID && slices.Equal(x.Via, y.Via) && x.Pick == y.Pick
	}) {
		t.Error("the same seed gave two plans")
	}
	c := Plan(8, 2*time.Minute)
	if len(a) == len(c) && a[10].ID == c[10].ID && a[10].At == c[10].At && a[20].At == c[20].At {
		t.Error("two seeds gave the same plan")
	}
	kinds := map[string]int{}
	reused, races := 0, 0
	for _, s := range a {
		kinds[s.Kind]++
		if s.Reused {
			reused++
		}
		if s.Kind == OpCreateRace {
			races++
		}
		if s.At >= 2*time.Minute || s.At+s.Down > 2*time.Minute {
			t.Errorf("step %d outside the duration: %+v", s.N, s)
		}
	}
	for _, k := range windowFaults {
		if kinds[k] == 0 {
			t.Errorf("a 2-minute plan lacks fault %s: %v", k, kinds)
		}
	}
	if reused == 0 || races == 0 || kinds[OpHandDelete] == 0 || kinds[FaultPodDelete] == 0 || kinds[FaultFate] == 0 {
		t.Errorf("plan lacks re-used ids, races, hand deletes, pod deletions or fates: %v", kinds)
	}
	// Window faults never overlap.
	var end time.Duration
	for _, s := range a {
		if slices.Contains(windowFaults, s.Kind) {
			if s.At < end {
				t.Errorf("fault %d starts at %s before the previous ends (%s)", s.N, s.At, end)
			}
			end = s.At + s.Down
		}
	}
}

// The seeds logged before the issue-23 lanes still plan the same steps, with those lanes
// on top (digest of every step but theirs, taken from the code before them).
func TestPlanKeepsEarlierSteps(t *testing.T) {
	for seed, want := range map[uint64]string{7: "83018d7ef609eb9f", 114630519: "a1c50e1391a6b970"} {
		h := sha256.New()
		steps := Plan(seed, 3*time.Minute)
		kinds := map[string]int{}
		for _, s := range steps {
			kinds[s.Kind]++
			if slices.Contains(proxyFaults, s.Kind) || s.Kind == OpForeign || s.Kind == OpCreateCleanup || s.Kind == OpDeleteRace {
				continue
			}
			fmt.Fprintf(h, "%d %s %s %v %d %s %s %d %s\n", s.At, s.Kind, s.ID, s.Via, s.Pick, s.Image, s.Ports, s.Down, s.Fate)
		}
		if got := fmt.Sprintf("%x", h.Sum(nil))[:16]; got != want {
			t.Errorf("seed %d: the earlier steps changed (digest %s, want %s)", seed, got, want)
		}
		for _, k := range append(slices.Clone(proxyFaults), OpForeign, OpCreateCleanup, OpDeleteRace) {
			if kinds[k] == 0 {
				t.Errorf("seed %d: a 3-minute plan lacks %s: %v", seed, k, kinds)
			}
		}
	}
	// A one-minute plan (chaos-ci) still has every proxy fault once, proxy faults
	// never overlap, and every clean-up DELETE goes to the other replica 0-50 ms later.
	var end time.Duration
	for _, s := range Plan(7, time.Minute) {
		switch {
		case slices.Contains(proxyFaults, s.Kind):
			if s.At < end {
				t.Errorf("proxy fault %d starts at %s before the previous ends (%s)", s.N, s.At, end)
			}
			end = s.At + s.Down
		case s.Kind == OpCreateCleanup, s.Kind == OpDeleteRace:
			if s.Via[0] == s.Via[1] || s.Lag < 0 || s.Lag > 50*time.Millisecond {
				t.Errorf("clean-up %+v", s)
			}
		}
	}
}

func TestForeignUntouched(t *testing.T) {
	labels := map[string]string{"dcm.project/dcm-instance-id": "x", "dcm.project/dcm-service-type": "database"}
	obj := func(kind, name, uid string) Object {
		return Object{Kind: kind, Name: name, ID: "x", UID: uid, Generation: 1, ServiceType: "database", Labels: labels}
	}
	dep, svc := obj("Deployment", "database-1", "u1"), obj("Service", "database-2", "u2")
	made := Entry{Type: "op", Kind: OpForeign, Via: "kubectl", ID: "x", Start: at(0), End: at(0.1), Foreign: []Object{dep, svc}}
	look := func(s float64, objs ...Object) Entry {
		return Entry{Type: "observe", Kind: OpForeign, Start: at(s), End: at(s), Foreign: objs}
	}
	changed := dep
	changed.Generation = 2
	deleting := svc
	deleting.Deleting = true
	runRows(t, "other providers' objects untouched", []row{
		{name: "there all along", h: []Entry{made, look(10, dep, svc)}, final: func(f *Final) { f.Foreign = []Object{dep, svc} }},
		{name: "gone at rest", h: []Entry{made, look(10, dep, svc)}, final: func(f *Final) { f.Foreign = []Object{dep} }, breach: true},
		{name: "deleted and made again by someone (another uid)", h: []Entry{made},
			final: func(f *Final) { again := svc; again.UID = "u3"; f.Foreign = []Object{dep, again} }, breach: true},
		{name: "terminating when looked at, gone from the look", h: []Entry{made, look(10, dep, deleting)},
			final: func(f *Final) { f.Foreign = []Object{dep, svc} }, breach: true},
		{name: "its spec changed", h: []Entry{made, look(10, changed, svc)},
			final: func(f *Final) { f.Foreign = []Object{dep, svc} }, breach: true},
		{name: "a look that failed says nothing", h: []Entry{made, {Type: "observe", Kind: OpForeign, Start: at(10), Err: "connection refused"}},
			final: func(f *Final) { f.Foreign = []Object{dep, svc} }},
		{name: "a look before it was made says nothing", h: []Entry{look(-1), made},
			final: func(f *Final) { f.Foreign = []Object{dep, svc} }},
	})
}

func TestServiceWhenAsked(t *testing.T) {
	withPorts := func(f *Final) { live(f, "x", "i1"); f.Deployments[0].Ports = 1 }
	runRows(t, "a Service for every container that asks", []row{
		{name: "ports and its Service", final: withPorts},
		{name: "no ports, no Service", final: func(f *Final) { live(f, "x", "i1"); f.Services = nil }},
		{name: "ports, no Service", final: func(f *Final) { withPorts(f); f.Services = nil }, breach: true},
		{name: "ports, the Service of an earlier incarnation", final: func(f *Final) { withPorts(f); f.Services[0].Incarnation = "i0" }, breach: true},
		{name: "ports, its Service terminating", final: func(f *Final) { withPorts(f); f.Services[0].Deleting = true }, breach: true},
	})
}

func TestDeletedStaysGone(t *testing.T) {
	create := func(via string, s, e float64, code int) Entry { return op(OpCreate, via, "x", s, e, code) }
	get200 := func(s float64) Entry { g := op(OpGet, "b", "x", s, s+0.01, 200); g.Status = "RUNNING"; return g }
	runRows(t, "gone after DELETE answered", []row{
		{name: "DCM's clean-up: DELETE 204 while the create finished, still live",
			h:      []Entry{create("a", 0, 0.5, 201), op(OpDelete, "b", "x", 0.03, 0.05, 204)},
			final:  func(f *Final) { live(f, "x", "i1") },
			breach: true},
		{name: "DELETE 404 while the create held the id, then a GET 200",
			h:      []Entry{create("a", 0, 0.5, 201), op(OpDelete, "b", "x", 0.03, 0.05, 404), get200(2)},
			breach: true},
		{name: "DELETE 204, then RUNNING on the stream",
			h:      []Entry{create("a", 0, 0.5, 201), op(OpDelete, "b", "x", 0.03, 0.05, 204)},
			evs:    []Event{ev("x", "RUNNING", 3), ev("x", "DELETED", 4)},
			breach: true},
		{name: "a RUNNING already on its way when the DELETE answered",
			h:   []Entry{create("a", 0, 0.5, 201), op(OpDelete, "b", "x", 1, 1.05, 204)},
			evs: []Event{ev("x", "RUNNING", 1.5), ev("x", "DELETED", 2)}},
		{name: "the DELETE waited for the create and deleted it",
			h:   []Entry{create("a", 0, 0.5, 201), op(OpDelete, "b", "x", 0.03, 0.6, 204)},
			evs: []Event{ev("x", "PENDING", 0.4), ev("x", "DELETED", 0.7)}},
		{name: "the DELETE answered 409 (a create in flight)",
			h:     []Entry{create("a", 0, 0.5, 201), op(OpDelete, "b", "x", 0.03, 0.05, 409)},
			final: func(f *Final) { live(f, "x", "i1") }},
		{name: "created again after the DELETE",
			h:     []Entry{create("a", 0, 0.5, 201), op(OpDelete, "b", "x", 1, 1.05, 204), create("a", 2, 2.5, 201), get200(3)},
			final: func(f *Final) { live(f, "x", "i2") }},
		{name: "a create sent with the DELETE (they may arrive the other way round)",
			h:     []Entry{create("a", 0.999, 1.5, 201), op(OpDelete, "b", "x", 1, 1.05, 404)},
			final: func(f *Final) { live(f, "x", "i1") }},
		{name: "the registry's DELETE is not judged here",
			h:     []Entry{create("a", 0, 0.5, 201), op(OpDelete, "registry", "x", 0.03, 0.05, 204)},
			final: func(f *Final) { live(f, "x", "i1") }},
	})
}

func TestNoStaleOK(t *testing.T) {
	get := func(s float64, code int, status string) Entry {
		g := op(OpGet, "b", "x", s, s+0.01, code)
		g.Status = status
		return g
	}
	created, deleted := op(OpCreate, "a", "x", 0, 1, 201), op(OpDelete, "a", "x", 2, 3, 204)
	runRows(t, "no stale 200", []row{
		{name: "200 within the bound", h: []Entry{created, deleted, get(9.9, 200, "RUNNING")}},
		{name: "200 past the bound (5 s + 2 s)", h: []Entry{created, deleted, get(10.1, 200, "RUNNING")}, breach: true},
		{name: "404 past the bound", h: []Entry{created, deleted, get(20, 404, "")}},
		{name: "503 past the bound", h: []Entry{created, deleted, get(20, 503, "")}},
		{name: "200 long after a hand delete",
			h: []Entry{created, func() Entry { e := op(OpHandDelete, "kubectl", "x", 2, 2.1, 0); e.Count = 1; return e }(), get(30, 200, "RUNNING")}, breach: true},
		{name: "200 long after a DELETED on the stream", h: []Entry{created, get(30, 200, "RUNNING")}, evs: []Event{ev("x", "DELETED", 5)}, breach: true},
		{name: "created again since", h: []Entry{created, deleted, op(OpCreate, "b", "x", 20, 21, 201), get(30, 200, "RUNNING")}},
		{name: "a create with no answer may have made it again", h: []Entry{created, deleted, op(OpCreate, "b", "x", 20, 21, 503), get(30, 200, "RUNNING")}},
	})
	// The bound is the replicas' setting, kept in the run.
	in := build([]Entry{created, deleted, get(10.1, 200, "RUNNING")}, nil, Final{})
	in.Run.MaxStaleness = 10 * time.Second
	if vs := violationsOf(t, in, "no stale 200"); len(vs) != 0 {
		t.Errorf("with a 10 s bound: %+v", vs)
	}
}

// A replica whose proxy faults it may answer 503 during the fault and a grace after;
// the other replica may not.
func TestProxyFaultsAllow503(t *testing.T) {
	fault := func(kind string) Entry {
		return Entry{Type: "fault", Kind: kind, Via: "a", Start: at(0), End: at(10)}
	}
	runRows(t, "no 5xx but 503 in an apiserver outage", []row{
		{name: "503 on the blocked replica, 30 s after", h: []Entry{fault(FaultWatchBlock), op(OpGet, "a", "x", 40, 41, 503)}},
		{name: "503 on the other replica", h: []Entry{fault(FaultWatchBlock), op(OpGet, "b", "x", 5, 6, 503)}, breach: true},
		{name: "503 while answers are lost", h: []Entry{fault(FaultAPIDrop), op(OpCreate, "a", "x", 5, 6, 503)}},
		{name: "503 long after answers were delayed", h: []Entry{fault(FaultAPIDelay), op(OpCreate, "a", "x", 30, 31, 503)}, breach: true},
	})
}

func TestDeletedMeansDeleted(t *testing.T) {
	race := []Entry{op(OpCreate, "a", "r-001", 0, 0.05, 201), op(OpDelete, "b", "r-001", 0.01, 0.06, 204)}
	runRows(t, "deleted means deleted", []row{
		{name: "204, nothing left", h: race},
		{name: "404 (the DELETE came first), the container lives", h: []Entry{
			op(OpCreate, "a", "r-002", 0, 0.05, 201), op(OpDelete, "b", "r-002", 0.01, 0.02, 404)},
			final: func(f *Final) { live(f, "r-002", "i1") }},
		{name: "204, its Deployment left running", h: race, final: func(f *Final) {
			f.Deployments = append(f.Deployments, dep("r-001", "i1", normalImage, "1"))
		}, breach: true},
		{name: "204, its record left owing DELETED", h: race, final: func(f *Final) {
			f.Records = append(f.Records, Object{Name: "dcm-container-r-001", ID: "r-001", Deleting: true})
		}, breach: true},
		{name: "another lane's id is not this invariant's", h: []Entry{
			op(OpCreate, "a", "x", 0, 0.05, 201), op(OpDelete, "b", "x", 0.01, 0.06, 204)},
			final: func(f *Final) { live(f, "x", "i1") }},
	})
}
