package chaos

import (
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
	f.Records = append(f.Records, Object{Name: "dcm-container-" + id, ID: id, Incarnation: inc})
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
			f.Records = append(f.Records, Object{Name: "dcm-container-y", ID: "y", Finalizers: []string{"dcm.project/deleted-report-owed"}})
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
	})
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
