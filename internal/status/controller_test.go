package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/freshness"
	"github.com/dcm-project/k8s-container-sp/internal/logtest"
)

// The controller's machinery (debounce, queue, retries, drain, the confirmation, the order
// of the cluster steps around the publish: delete the record, publish, finalize) on
// in-memory stand-ins for its three narrow interfaces and a fake clock. The real
// informers, NATS and cluster are exercised in tools/devenv/e2e/app.

type fakeSource struct {
	mu      sync.Mutex
	snaps   map[string]container.Snapshot
	handler func(id string)
	behind  []freshness.Lag
}

func (s *fakeSource) Behind() []freshness.Lag {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.behind
}

// setBehind marks the caches behind (or current: nil) and tells the controller of id,
// as a relist would.
func (s *fakeSource) setBehind(id string, lags []freshness.Lag) {
	s.mu.Lock()
	s.behind = lags
	h := s.handler
	s.mu.Unlock()
	if h != nil {
		h(id)
	}
}

func (s *fakeSource) Watch(h func(id string)) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
	return func() {}, nil
}
func (s *fakeSource) WaitForSync(context.Context) bool { return true }
func (s *fakeSource) Snapshot(id string) container.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snaps[id]
}
func (s *fakeSource) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.snaps {
		ids = append(ids, id)
	}
	return ids
}

// set stores a container's snapshot and tells the controller, as an informer would.
func (s *fakeSource) set(id string, snap container.Snapshot) {
	s.mu.Lock()
	s.snaps[id] = snap
	h := s.handler
	s.mu.Unlock()
	h(id)
}

// dropped takes deleted Deployments and Services out of the caches, as their watch
// does, and tells the controller.
func (s *fakeSource) dropped(deps []*container.Deployment, svcs []*container.Service) {
	s.mu.Lock()
	var ids []string
	for id, snap := range s.snaps {
		n := len(snap.Deployments) + len(snap.Services)
		snap.Deployments = slices.DeleteFunc(slices.Clone(snap.Deployments), func(d *container.Deployment) bool { return slices.Contains(deps, d) })
		snap.Services = slices.DeleteFunc(slices.Clone(snap.Services), func(v *container.Service) bool { return slices.Contains(svcs, v) })
		if len(snap.Deployments)+len(snap.Services) != n {
			s.snaps[id] = snap
			ids = append(ids, id)
		}
	}
	h := s.handler
	s.mu.Unlock()
	for _, id := range ids {
		h(id)
	}
}

// wrote shows a write to record uid in the caches, as the informer brings it: change
// is applied to a copy of the record (the fixtures share theirs), and the controller is
// told. Nothing when no cached snapshot has the record.
func (s *fakeSource) wrote(uid types.UID, change func(*container.Record)) {
	s.mu.Lock()
	var id string
	for i, snap := range s.snaps {
		if snap.Record != nil && snap.Record.UID == uid {
			id = i
		}
	}
	if id == "" {
		s.mu.Unlock()
		return
	}
	snap := s.snaps[id]
	rec := *snap.Record
	change(&rec)
	snap.Record = &rec
	s.snaps[id] = snap
	h := s.handler
	s.mu.Unlock()
	h(id)
}

// journal records, in order, everything the controller did to the outside world: it is
// the fake Publisher and the fake Cluster.
type journal struct {
	mu        sync.Mutex
	entries   []string
	failFirst int // publishes to fail before one succeeds
	// failDeleteRecord, failFinalize, failConfirmed: calls to fail before one succeeds.
	failDeleteRecord, failFinalize, failConfirmed int
	// unstored: publishes go out with no stream storing them (core NATS).
	unstored bool
	// stale: the caches do not show the controller's own writes (a watch that is behind);
	// else a DeleteRecord or Finalize that succeeded shows in src at once.
	stale bool
	// src is what the caches show; api, per id, what the apiserver has when it differs
	// (a cache that is behind). Confirmed answers api's, else the cache's.
	src     *fakeSource
	api     map[string]container.Snapshot
	changed chan struct{}
	// events: the event id of every publish attempt, failed or not, in order; reports,
	// what each attempt sent.
	events  []string
	reports []Report
	// gate, when set, holds every publish until it is closed.
	gate chan struct{}
}

func newJournal() *journal {
	return &journal{changed: make(chan struct{}, 1000), api: map[string]container.Snapshot{}}
}

func (j *journal) add(e string) {
	j.mu.Lock()
	j.entries = append(j.entries, e)
	j.mu.Unlock()
	select {
	case j.changed <- struct{}{}:
	default: // await looks at the entries every millisecond anyway
	}
}

// failing takes one failure off *n: true when this call fails. j.mu is held.
func failing(n *int) bool {
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (j *journal) Publish(_ context.Context, eventID, id string, rep Report) (bool, error) {
	st := rep.Status
	j.mu.Lock()
	j.events = append(j.events, eventID)
	j.reports = append(j.reports, rep)
	fail := failing(&j.failFirst)
	stored, gate := !j.unstored, j.gate
	j.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail {
		j.add("publish failed " + id)
		return false, errors.New("NATS is down")
	}
	if !stored {
		j.add("publish unstored " + id + " " + string(st.Status))
		return false, nil
	}
	j.add("publish " + id + " " + string(st.Status))
	return true, nil
}

func (j *journal) DeleteRecord(_ context.Context, r container.Record, svcs []*container.Service) error {
	j.mu.Lock()
	fail := failing(&j.failDeleteRecord)
	j.mu.Unlock()
	if fail {
		j.add("delete record failed " + string(r.UID))
		return errors.New("the apiserver is down")
	}
	j.add("delete record " + string(r.UID))
	for _, s := range svcs {
		j.add("delete service " + s.Name)
	}
	j.reachesTheCache(r.UID, func(rec *container.Record) { rec.Terminating = true })
	j.dropped(nil, svcs)
	return nil
}

func (j *journal) DeleteOrphans(_ context.Context, deps []*container.Deployment, svcs []*container.Service) error {
	for _, d := range deps {
		j.add("delete deployment " + d.Name)
	}
	for _, v := range svcs {
		j.add("delete service " + v.Name)
	}
	j.dropped(deps, svcs)
	return nil
}

// dropped takes deleted objects out of the caches, unless they are stale.
func (j *journal) dropped(deps []*container.Deployment, svcs []*container.Service) {
	j.mu.Lock()
	stale := j.stale
	j.mu.Unlock()
	if !stale {
		j.src.dropped(deps, svcs)
	}
}

func (j *journal) Finalize(_ context.Context, r container.Record) error {
	j.mu.Lock()
	fail := failing(&j.failFinalize)
	j.mu.Unlock()
	if fail {
		j.add("finalize failed " + string(r.UID))
		return errors.New("the apiserver is down")
	}
	j.add("finalize " + string(r.UID))
	j.reachesTheCache(r.UID, func(rec *container.Record) { rec.Owed = false })
	return nil
}

// reachesTheCache shows a write the controller made in the caches, unless they are stale.
func (j *journal) reachesTheCache(uid types.UID, change func(*container.Record)) {
	j.mu.Lock()
	stale := j.stale
	j.mu.Unlock()
	if !stale {
		j.src.wrote(uid, change)
	}
}

func (j *journal) Confirmed(_ context.Context, id string) (container.Snapshot, error) {
	j.mu.Lock()
	fail := failing(&j.failConfirmed)
	snap, behind := j.api[id]
	j.mu.Unlock()
	if fail {
		j.add("confirm failed " + id)
		return container.Snapshot{}, errors.New("the apiserver is down")
	}
	if !behind {
		return confirmedOf(j.src.Snapshot(id)), nil
	}
	j.add("apiserver differs " + id)
	return confirmedOf(snap), nil
}

// confirmedOf is snap as Cluster.Confirmed answers it: the record and, when the record
// lives, its Deployments; no pods (the controller adds the cache's), no Services.
func confirmedOf(snap container.Snapshot) container.Snapshot {
	out := container.Snapshot{Record: snap.Record}
	if snap.Record != nil && !snap.Record.Terminating {
		out.Deployments = snap.Deployments
	}
	return out
}

// setAPI makes the apiserver have snap for id, whatever the cache shows.
func (j *journal) setAPI(id string, snap container.Snapshot) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.api[id] = snap
}

// caughtUp makes the apiserver answer what the cache shows for id.
func (j *journal) caughtUp(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.api, id)
}

// waitFor waits (real time, bounded) until the journal holds want.
func (j *journal) waitFor(t *testing.T, want ...string) {
	t.Helper()
	j.await(t, nil, want)
}

// awaitAll waits until the journal holds each of want, in any order, among others.
func (j *journal) awaitAll(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j.mu.Lock()
		got := slices.Clone(j.entries)
		j.mu.Unlock()
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return slices.Contains(got, w) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal lacks %q; it holds %q", missing, got)
		}
		time.Sleep(time.Millisecond)
	}
}

// await waits until the journal holds want, calling tick (if set) every millisecond
// of real time meanwhile, e.g. to move a fake clock.
func (j *journal) await(t *testing.T, tick func(), want []string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		j.mu.Lock()
		got := slices.Clone(j.entries)
		j.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-j.changed:
		case <-time.After(time.Millisecond):
			if tick != nil {
				tick()
			}
		case <-timeout:
			t.Fatalf("journal %q, want %q", got, want)
		}
	}
}

type rig struct {
	logs  *logtest.Buffer // what the controller logged (every level)
	src   *fakeSource
	out   *journal
	clock *clocktesting.FakeClock
	rep   *Controller
	drain chan struct{}
	done  chan struct{}
}

func startController(t *testing.T, debounce time.Duration, failFirst int) *rig {
	t.Helper()
	return startControllerWith(t, debounce, failFirst, nil)
}

// startControllerWith is startController with options changed by opts.
func startControllerWith(t *testing.T, debounce time.Duration, failFirst int, opts func(*Options)) *rig {
	t.Helper()
	r := &rig{
		src: &fakeSource{snaps: map[string]container.Snapshot{}}, out: newJournal(),
		clock: clocktesting.NewFakeClock(t0), drain: make(chan struct{}), done: make(chan struct{}),
		logs: &logtest.Buffer{},
	}
	r.out.failFirst = failFirst
	r.out.src = r.src
	o := Options{
		Debounce: debounce, MaxWait: 10 * debounce, DrainTimeout: time.Second, Workers: 1, Clock: r.clock, Settle: settle,
	}
	if opts != nil {
		opts(&o)
	}
	r.rep = NewController(r.src, r.out, r.out, o, slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		r.rep.Run(ctx, r.drain)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	for !r.rep.Active() {
		time.Sleep(time.Millisecond)
	}
	return r
}

// liveSnap is a live container: record r1 and the Deployment it owns.
func liveSnap(name string) container.Snapshot {
	return container.Snapshot{Record: record(), Deployments: deps(dep(name))}
}

func TestControllerDebouncesThenPublishes(t *testing.T) {
	r := startController(t, 100*time.Millisecond, 0)
	r.src.set("a", liveSnap("a-1"))
	r.src.set("a", liveSnap("a-1"))
	if n := r.rep.Pending(); n != 1 {
		t.Fatalf("pending %d, want the change held by the debounce", n)
	}
	r.clock.Step(100 * time.Millisecond)
	r.out.waitFor(t, "publish a PENDING")
}

func TestControllerRetriesWithBackoffAndSendsOnce(t *testing.T) {
	r := startController(t, 0, 2)
	r.src.set("a", liveSnap("a-1"))
	// Retries wait for the backoff (100 ms, doubling), on the clock.
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) },
		[]string{"publish failed a", "publish failed a", "publish a PENDING"})
}

// Issue 23: each retry minted a new event id, so neither JetStream (Nats-Msg-Id) nor
// DCM could drop a retry whose first attempt was stored but not acknowledged. The
// retries of one change share an id; a new change, a change back, and a republish
// each get a new one.
func TestControllerEventIDs(t *testing.T) {
	step := func(r *rig) func() { return func() { r.clock.Step(10 * time.Millisecond) } }
	t.Run("retries of one change share its id", func(t *testing.T) {
		r := startController(t, 0, 2)
		r.src.set("a", liveSnap("a-1"))
		r.out.await(t, step(r), []string{"publish failed a", "publish failed a", "publish a PENDING"})
		ev := r.out.eventIDs()
		if ev[0] == "" || ev[1] != ev[0] || ev[2] != ev[0] {
			t.Errorf("event ids %q, want one id for the three attempts", ev)
		}
	})
	t.Run("a change during the retries is a new event", func(t *testing.T) {
		r := startController(t, 0, 1)
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish failed a")
		r.src.set("a", deletedSnap())
		r.out.await(t, step(r), []string{"publish failed a", "publish a DELETED", "finalize r1"})
		if ev := r.out.eventIDs(); ev[1] == ev[0] {
			t.Errorf("event ids %q: PENDING and DELETED share one", ev)
		}
	})
	t.Run("a change back, a new incarnation and a republish are new events", func(t *testing.T) {
		r := startController(t, 0, 0)
		r.src.set("a", liveSnap("a-1"))
		want := []string{"publish a PENDING"}
		r.out.waitFor(t, want...)
		r.src.set("a", container.Snapshot{Record: record(), Deployments: deps(dep("a-1")), Pods: pods(runningPod())})
		want = append(want, "publish a RUNNING")
		r.out.waitFor(t, want...)
		r.src.set("a", liveSnap("a-1"))
		want = append(want, "publish a PENDING")
		r.out.waitFor(t, want...)
		r.src.set("a", deletedSnap())
		want = append(want, "publish a DELETED", "finalize r1")
		r.out.waitFor(t, want...)
		r.src.set("a", container.Snapshot{Record: record(uid("r2")), Deployments: deps(dep("a-2", ownedBy("r2")))})
		want = append(want, "publish a PENDING")
		r.out.waitFor(t, want...)
		r.rep.RepublishAll()
		want = append(want, "publish a PENDING")
		r.out.waitFor(t, want...)
		ev := r.out.eventIDs()
		seen := map[string]bool{}
		for _, e := range ev {
			seen[e] = true
		}
		if len(ev) != 6 || len(seen) != 6 {
			t.Errorf("event ids %q, want six different ones", ev)
		}
	})
	t.Run("a republish during the retries is a new event", func(t *testing.T) {
		r := startController(t, 0, 1)
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish failed a")
		r.rep.RepublishAll()
		r.out.await(t, step(r), []string{"publish failed a", "publish a PENDING"})
		if ev := r.out.eventIDs(); ev[1] == ev[0] {
			t.Errorf("event ids %q: the republish reused the failed attempt's", ev)
		}
	})
}

// The timestamp of an event is when the controller first planned it: kept through its
// retries (one event, one content), new for a new change and for a republish. A change
// of outputs alone while RUNNING is a new event.
func TestControllerDatesEachEvent(t *testing.T) {
	step := func(r *rig) func() { return func() { r.clock.Step(10 * time.Millisecond) } }
	running := func(ip string) container.Snapshot {
		p := runningPod()
		p.IP = ip
		return container.Snapshot{Record: record(), Deployments: deps(dep("a-1")), Pods: pods(p)}
	}
	r := startController(t, 0, 2)
	r.src.set("a", running("10.244.0.4"))
	r.out.await(t, step(r), []string{"publish failed a", "publish failed a", "publish a RUNNING"})
	reps := r.out.sentReports()
	if !reps[0].Observed.Equal(t0) {
		t.Errorf("observed %s, want the clock's time when it was first planned, %s", reps[0].Observed, t0)
	}
	if !reps[1].Observed.Equal(reps[0].Observed) || !reps[2].Observed.Equal(reps[0].Observed) {
		t.Errorf("the retries of one event are dated %s, %s, %s", reps[0].Observed, reps[1].Observed, reps[2].Observed)
	}
	if got := reps[2].Outputs.ProviderHints.PodIP; got != "10.244.0.4" {
		t.Errorf("RUNNING sent with pod IP %q", got)
	}

	r.clock.Step(time.Second)
	r.src.set("a", running("10.244.0.7"))
	r.out.waitFor(t, "publish failed a", "publish failed a", "publish a RUNNING", "publish a RUNNING")
	r.clock.Step(time.Second)
	r.rep.RepublishAll()
	r.out.waitFor(t, "publish failed a", "publish failed a", "publish a RUNNING", "publish a RUNNING", "publish a RUNNING")
	reps, ids := r.out.sentReports(), r.out.eventIDs()
	if reps[3].Outputs.ProviderHints.PodIP != "10.244.0.7" || ids[3] == ids[2] || !reps[3].Observed.After(reps[2].Observed) {
		t.Errorf("the new pod IP: %+v, event %s after %s", reps[3], ids[3], ids[2])
	}
	if ids[4] == ids[3] || !reps[4].Observed.After(reps[3].Observed) || !reps[4].Outputs.Equal(reps[3].Outputs) {
		t.Errorf("the republish: %+v, event %s after %s", reps[4], ids[4], ids[3])
	}
}

// sentReports are the reports of every publish attempt, in order.
func (j *journal) sentReports() []Report {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.reports)
}

func (j *journal) eventIDs() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// deletedSnap is container x deleted (through the API): its record terminating, its
// finalizer on, the garbage collector done with what it owned.
func deletedSnap() container.Snapshot {
	return container.Snapshot{Record: record(terminating)}
}

// settled moves the clock (past any backoff) until the controller owes nothing, then
// checks that the journal holds want and nothing more, however long it waits.
func (r *rig) settled(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.rep.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pending %d, want 0; journal %q", r.rep.Pending(), r.out.all())
		}
		r.clock.Step(10 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	for range 5 {
		r.clock.Step(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	if got := r.out.all(); !slices.Equal(got, want) {
		t.Errorf("journal %q, want %q and nothing more", got, want)
	}
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// A deleted container: its DELETED first, the record finalized only once a stream
// stored it; the record's last moments (the garbage collector at work, then gone) send
// nothing more.
func TestControllerPublishesDeletedThenFinalizes(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish a PENDING")
	// DELETE: the record terminating, its Deployment not yet collected (foreground).
	r.src.set("a", container.Snapshot{Record: record(terminating), Deployments: deps(dep("a-1", deleting)), Pods: pods(runningPod())})
	want := []string{"publish a PENDING", "publish a DELETED", "finalize r1"}
	r.out.waitFor(t, want...)
	// The finalizer is off; the garbage collector still deletes what the record owned.
	r.src.set("a", container.Snapshot{Record: record(terminating, notOwed), Deployments: deps(dep("a-1", deleting))})
	r.src.set("a", container.Snapshot{})
	r.rep.RepublishAll()
	r.settled(t, want...)
}

// A create that raced a DELETE made its Deployment and Service after the DELETE's own
// deletes: both are deleted while NATS is down, DELETED follows once they are gone and
// NATS is back, then the record is finalized.
func TestControllerDeletesADeletedRecordsWorkloadWithNATSDown(t *testing.T) {
	r := startController(t, 0, 3)
	r.src.set("a", container.Snapshot{Record: record(terminating), Deployments: deps(dep("a-1")), Services: []*container.Service{svc("a-s")}})
	want := []string{"delete deployment a-1", "delete service a-s", "publish failed a", "publish failed a", "publish failed a", "publish a DELETED", "finalize r1"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	r.settled(t, want...)
}

// A DELETED that failed (NATS down) is retried; the record is not finalized until it is
// delivered.
func TestControllerFinalizesOnlyAfterDeletedIsDelivered(t *testing.T) {
	r := startController(t, 0, 1)
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish failed a")
	r.src.set("a", deletedSnap())
	// The retry sends the newest state (DELETED), and only then is the record finalized.
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) },
		[]string{"publish failed a", "publish a DELETED", "finalize r1"})
	r.settled(t, "publish failed a", "publish a DELETED", "finalize r1")
}

// A finalize that failed is retried, the DELETED (delivered) not sent again.
func TestControllerRetriesAFailedFinalizeWithoutPublishingAgain(t *testing.T) {
	r := startController(t, 0, 0)
	r.out.failFinalize = 2
	r.src.set("a", deletedSnap())
	want := []string{"publish a DELETED", "finalize failed r1", "finalize failed r1", "finalize r1"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	r.settled(t, want...)
	if ev := r.out.eventIDs(); len(ev) != 1 {
		t.Errorf("event ids %q, want the one DELETED", ev)
	}
}

// A container whose Deployment was deleted by hand: its record is deleted first (the
// garbage collector takes what it owns), and its DELETED is the next plan's, made from
// the terminating record once the cache shows it, then the record is finalized.
func TestControllerDeletesTheRecordOfAGoneContainerBeforeItsDeleted(t *testing.T) {
	for _, failures := range []int{0, 2} {
		t.Run(fmt.Sprintf("%d failed deletes", failures), func(t *testing.T) {
			r := startController(t, 0, 0)
			r.out.failDeleteRecord = failures
			r.src.set("a", liveSnap("a-1"))
			want := []string{"publish a PENDING"}
			r.out.waitFor(t, want...)
			r.src.set("a", container.Snapshot{Record: record()}) // kubectl delete deployment
			for range failures {
				want = append(want, "delete record failed r1")
			}
			want = append(want, "delete record r1", "publish a DELETED", "finalize r1")
			r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
			r.settled(t, want...)
		})
	}
	// The container's Service goes with its record, as with a DELETE: a garbage
	// collector stuck after an apiserver restart would leave it (the chaos run, seed
	// 114630519). Another incarnation's Service is an orphan, deleted first.
	t.Run("with its Service", func(t *testing.T) {
		r := startController(t, 0, 0)
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish a PENDING")
		other := svc("svc-of-another")
		other.Incarnation = "r0"
		r.src.set("a", container.Snapshot{Record: record(), Services: []*container.Service{svc("svc-a"), other}})
		want := []string{"publish a PENDING", "delete service svc-of-another", "delete record r1", "delete service svc-a", "publish a DELETED", "finalize r1"}
		r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
		r.settled(t, want...)
	})
	t.Run("the cache slow to show the deletion", func(t *testing.T) {
		r := startController(t, 0, 0)
		r.out.stale = true
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish a PENDING")
		r.src.set("a", container.Snapshot{Record: record()})
		want := []string{"publish a PENDING", "delete record r1"}
		r.out.waitFor(t, want...)
		r.settled(t, want...) // no DELETED until the record is seen terminating
		// A republish while the cache still shows the live record, which the apiserver
		// has deleted: not deleted again, no DELETED of a record the cache has not seen
		// deleted.
		r.out.setAPI("a", deletedSnap())
		r.rep.RepublishAll()
		want = append(want, "apiserver differs a")
		r.out.waitFor(t, want...)
		r.out.caughtUp("a")
		r.src.set("a", deletedSnap())
		want = append(want, "publish a DELETED", "finalize r1")
		r.out.waitFor(t, want...)
	})
}

// A cache that still shows the record owed after its finalize (its watch behind) has
// the record finalized again, which is harmless (by UID, gone or replaced is success),
// and the DELETED is not sent again.
func TestControllerFinalizesAgainOnAStaleCache(t *testing.T) {
	r := startController(t, 0, 0)
	r.out.stale = true
	r.src.set("a", deletedSnap())
	want := []string{"publish a DELETED", "finalize r1"}
	r.out.waitFor(t, want...)
	r.src.set("a", deletedSnap()) // an unrelated event of the id
	want = append(want, "finalize r1")
	r.out.waitFor(t, want...)
	r.settled(t, want...)
}

// Issue 23 item 1: no destructive step on a cache alone. Each race is a cache that is
// behind the apiserver; while it is, the controller does nothing (and keeps the container
// owed), and once the cache catches up it does what the apiserver's state asks for.
func TestControllerTakesNoDestructiveStepTheApiserverDoesNotConfirm(t *testing.T) {
	old := created(time.Hour)
	reserved := container.Snapshot{Record: record(uid("r2")), Deployments: deps(dep("a-2", ownedBy("r2")))}
	for _, tc := range []struct {
		name string
		// delivered: a status delivered before the race (nil: a new leader, nothing sent).
		delivered *container.Snapshot
		cache     container.Snapshot
		apiserver container.Snapshot
		// after: what the controller does once the cache shows what the apiserver has.
		after []string
	}{
		{"the cache shows no record of a live container (reported live): no DELETED",
			ptrTo(liveSnap("a-1")), container.Snapshot{}, liveSnap("a-1"), nil},
		{"the cache shows a deleted record gone at the apiserver (its DELETED delivered, finalized): not sent again",
			nil, deletedSnap(), container.Snapshot{}, nil},
		{"the cache shows a deleted record the apiserver has finalized already: not sent again",
			nil, deletedSnap(), container.Snapshot{Record: record(terminating, notOwed)}, nil},
		{"the id was reserved again (another record): no DELETED, the old record not finalized",
			nil, deletedSnap(), reserved, []string{"publish a PENDING"}},
		{"the cache shows an old record without Deployment; the apiserver has the Deployment: the record not deleted",
			nil, container.Snapshot{Record: record(old)}, container.Snapshot{Record: record(old), Deployments: deps(live)},
			[]string{"publish a PENDING"}},
		{"the cache shows a record reported live without its Deployment; the apiserver has it: the record not deleted",
			ptrTo(liveSnap("a-1")), container.Snapshot{Record: record()}, liveSnap("a-1"), nil},
		{"the cache shows an old record without Deployment, deleted at the apiserver already: not deleted again; then its DELETED",
			nil, container.Snapshot{Record: record(old)}, container.Snapshot{Record: record(old, terminating)},
			[]string{"publish a DELETED", "finalize r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startController(t, 0, 0)
			var want []string
			if tc.delivered != nil {
				r.src.set("a", *tc.delivered)
				want = append(want, "publish a PENDING")
				r.out.waitFor(t, want...)
			}
			r.out.setAPI("a", tc.apiserver)
			r.src.set("a", tc.cache)
			want = append(want, "apiserver differs a")
			r.out.waitFor(t, want...)
			if n := r.rep.Pending(); n != 1 {
				t.Errorf("pending %d while the cache is behind, want 1", n)
			}
			// Looked at again with backoff: still nothing done.
			want = append(want, "apiserver differs a")
			r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)

			// The cache catches up.
			r.out.caughtUp("a")
			r.src.set("a", tc.apiserver)
			want = append(want, tc.after...)
			r.out.waitFor(t, want...)
			r.settled(t, want...)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// A confirmation the apiserver does not answer is retried; nothing is done meanwhile.
func TestControllerRetriesAFailedConfirmation(t *testing.T) {
	r := startController(t, 0, 0)
	r.out.failConfirmed = 2
	r.src.set("a", deletedSnap())
	want := []string{"confirm failed a", "confirm failed a", "publish a DELETED", "finalize r1"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	r.settled(t, want...)
}

// Issue 23 item 6: with no stream capturing dcm.container a DELETED goes out on plain
// NATS, where nobody may have read it: its record is not finalized (DELETED still owed,
// retried with backoff and counted as pending) until a stream stores one.
func TestControllerDoesNotFinalizeAnUnstoredDeleted(t *testing.T) {
	r := startController(t, 0, 0)
	r.out.unstored = true
	r.src.set("a", deletedSnap())
	r.out.waitFor(t, "publish unstored a DELETED")
	if n := r.rep.Pending(); n != 1 {
		t.Errorf("pending %d, want the DELETED owed", n)
	}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) },
		[]string{"publish unstored a DELETED", "publish unstored a DELETED"})
	ev := r.out.eventIDs()
	if ev[1] != ev[0] {
		t.Errorf("event ids %q: a retry of one DELETED must keep its id", ev)
	}
	if !strings.Contains(r.logs.String(), "stored by no stream") {
		t.Errorf("the hold is not logged: %s", r.logs.String())
	}
	// A stream now captures the subject.
	r.out.mu.Lock()
	r.out.unstored = false
	r.out.mu.Unlock()
	want := []string{"publish unstored a DELETED", "publish unstored a DELETED", "publish a DELETED", "finalize r1"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	if ev := r.out.eventIDs(); ev[2] != ev[0] {
		t.Errorf("event ids %q: the stored DELETED is a retry of the unstored one", ev)
	}
	r.settled(t, want...)
}

// A DELETED with no record (its finalizer stripped by hand) has nothing to keep it
// owed: sent on plain NATS, it is not retried.
func TestControllerSendsTheDeletedOfARecordlessContainerOnce(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish a PENDING")
	r.out.mu.Lock()
	r.out.unstored = true
	r.out.mu.Unlock()
	r.src.set("a", container.Snapshot{})
	r.settled(t, "publish a PENDING", "publish unstored a DELETED")
}

// A live status needs no stream: it is not retried when plain NATS carried it.
func TestControllerSendsLiveStatusesOnPlainNATS(t *testing.T) {
	r := startController(t, 0, 0)
	r.out.unstored = true
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish unstored a PENDING")
	r.settled(t, "publish unstored a PENDING")
}

// Chaos seed 14: an id re-created and deleted while the leader's cache was behind; the
// leader only ever saw the new container's record, deleted, and the last status it had
// sent for the id was the previous container's DELETED. The new one's DELETED is sent.
func TestControllerSendsTheDeletedOfEachIncarnation(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.set("a", deletedSnap())
	r.out.waitFor(t, "publish a DELETED", "finalize r1")
	r.src.set("a", container.Snapshot{Record: record(uid("r2"), terminating)})
	r.out.waitFor(t, "publish a DELETED", "finalize r1", "publish a DELETED", "finalize r2")
}

// A Deployment with the id that no record controls is not a container: nothing is
// published about it, nothing deleted, a republish included.
func TestControllerIgnoresADeploymentNoRecordOwns(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.set("ref", container.Snapshot{Deployments: deps(dep("ref-1", unowned)), Pods: pods(runningPod())})
	r.rep.RepublishAll()
	r.settled(t)
}

// A record with no Deployment is a create in progress until settle; then the container
// counts as gone (its creator died): the record is deleted, and its DELETED follows.
func TestControllerLooksAgainAtARecordWithoutDeployment(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.set("a", container.Snapshot{Record: record()}) // made at t0, settles at t0+40s
	r.clock.Step(39 * time.Second)
	time.Sleep(10 * time.Millisecond)
	r.out.waitFor(t)
	// No Deployment came: the create died.
	want := []string{"delete record r1", "publish a DELETED", "finalize r1"}
	r.out.await(t, func() { r.clock.Step(100 * time.Millisecond) }, want)
	r.settled(t, want...)
}

// A Deployment that joins its record within settle is the container: its status, and
// the recheck finds it live.
func TestControllerPublishesAContainerWhoseDeploymentCameLate(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.set("a", container.Snapshot{Record: record()})
	r.clock.Step(20 * time.Second)
	time.Sleep(10 * time.Millisecond)
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish a PENDING")
	r.clock.Step(time.Minute) // past the recheck
	r.settled(t, "publish a PENDING")
}

func TestControllerDrainDeliversWhatTheDebounceHolds(t *testing.T) {
	r := startController(t, time.Hour, 0)
	r.src.set("a", liveSnap("a-1"))
	close(r.drain)
	// The drain polls the queue on the clock: keep it moving until Run returns.
	for {
		select {
		case <-r.done:
			r.out.waitFor(t, "publish a PENDING")
			return
		case <-time.After(time.Millisecond):
			r.clock.Step(10 * time.Millisecond)
		}
	}
}

func TestControllerRepublishSendsUnchangedStatusAgain(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish a PENDING")
	r.src.set("a", liveSnap("a-1")) // unchanged: nothing
	r.rep.RepublishAll()
	r.out.waitFor(t, "publish a PENDING", "publish a PENDING")
}

// A change made while every status is being republished waits behind a few of them, not
// behind all: the republish is fed to the queue as the workers take from it.
func TestControllerChangeIsNotQueuedBehindARepublish(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.mu.Lock()
	for i := range 100 {
		r.src.snaps[fmt.Sprint("old-", i)] = liveSnap("d-1")
	}
	r.src.mu.Unlock()
	gate := make(chan struct{})
	r.out.mu.Lock()
	r.out.gate = gate
	r.out.mu.Unlock()
	r.rep.RepublishAll()
	for len(r.out.eventIDs()) == 0 { // the first republish is being sent
		time.Sleep(time.Millisecond)
	}
	r.src.set("changed", liveSnap("c-1"))
	close(gate)
	deadline := time.Now().Add(10 * time.Second)
	for r.rep.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got := r.out.all()
	at := slices.Index(got, "publish changed PENDING")
	if len(got) != 101 || at < 0 || at > 2 {
		t.Fatalf("the change was sent %dth of %d, want within the first 3", at+1, len(got))
	}
}

// lines counts log lines by level.
type lines struct {
	mu     sync.Mutex
	counts map[slog.Level]int
	text   []string
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[r.Level]++
	l.text = append(l.text, r.Message)
	return nil
}
func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }

// An outage is two log lines, not one per container per retry.
func TestControllerLogsAnOutageOnce(t *testing.T) {
	r := startController(t, 0, 60)
	logs := &lines{counts: map[slog.Level]int{}}
	r.rep.log = slog.New(logs)
	for _, id := range []string{"a", "b", "c"} {
		r.src.set(id, liveSnap(id+"-1"))
	}
	// Keep the clock moving until all three were delivered after 60 failures.
	deadline := time.After(20 * time.Second)
	for {
		r.out.mu.Lock()
		delivered := 0
		for _, e := range r.out.entries {
			if strings.HasPrefix(e, "publish ") && !strings.HasPrefix(e, "publish failed") {
				delivered++
			}
		}
		r.out.mu.Unlock()
		if delivered == 3 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("not delivered: %v", r.out.entries)
		case <-time.After(time.Millisecond):
			r.clock.Step(50 * time.Millisecond)
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.counts[slog.LevelWarn] != 1 || logs.counts[slog.LevelInfo] < 1 {
		t.Errorf("log lines by level %v: %v", logs.counts, logs.text)
	}
}

// While a cache's watch is down past the staleness bound, nothing is sent from it: a
// container the apiserver has deleted would still look live there. Once it catches up,
// the status goes.
func TestControllerSendsNothingFromAStaleCache(t *testing.T) {
	r := startController(t, 0, 0)
	r.src.setBehind("a", []freshness.Lag{{Cache: "records", Behind: true, For: 6 * time.Second}})
	r.src.set("a", liveSnap("a-1"))
	for range 20 {
		r.clock.Step(50 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	r.out.mu.Lock()
	got := slices.Clone(r.out.entries)
	r.out.mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("sent from a stale cache: %q", got)
	}
	r.src.setBehind("a", nil)
	r.out.waitFor(t, "publish a PENDING")
}

// A container held back while the cache is behind is one log line, not one per look.
func TestControllerLogsAHeldBackContainerOnce(t *testing.T) {
	r := startController(t, 0, 0)
	logs := &lines{counts: map[slog.Level]int{}}
	r.rep.log = slog.New(logs)
	old := created(time.Hour)
	r.out.setAPI("a", container.Snapshot{Record: record(old), Deployments: deps(dep("a-1"))})
	r.src.set("a", container.Snapshot{Record: record(old)})
	want := []string{"apiserver differs a", "apiserver differs a", "apiserver differs a", "apiserver differs a"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.counts[slog.LevelInfo] != 1 || logs.counts[slog.LevelWarn] != 0 {
		t.Errorf("log lines by level %v: %v", logs.counts, logs.text)
	}
}

// What a status message keeps from the tenant (a pull error's view of the node's
// network) is logged for the operator when the status is published.
func TestControllerLogsWhatTheStatusWithholds(t *testing.T) {
	r := startController(t, 0, 0)
	kubelet := `failed to pull and unpack image "10.0.0.1:22/x:v1": dial tcp 10.0.0.1:22: connect: connection refused`
	p := container.PodOf(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{container.LabelIncarnation: "r1"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: kubelet}}}}},
	})
	snap := liveSnap("a-1")
	snap.Pods = []*container.Pod{&p}
	if st := snap.Status(); strings.Contains(st.Message, "dial tcp") {
		t.Fatalf("the status shows the node's network: %q", st.Message)
	}
	r.src.set("a", snap)
	r.out.waitFor(t, "publish a PENDING")
	eventually(t, func() bool { return strings.Contains(r.logs.String(), "detail kept out of the status message") })
	if logs := r.logs.String(); !strings.Contains(logs, "connection refused") {
		t.Errorf("the detail is not logged: %s", logs)
	}
}

func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("not logged within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A DELETED whose publish fails is retried, and its record finalized only once one is
// delivered (what the chaos run's planted bug, internal/app/plantedbug_chaos.go, breaks).
func TestControllerRetriesAFailedDeletedBeforeFinalizing(t *testing.T) {
	r := startController(t, 0, 3)
	r.src.set("a", deletedSnap())
	want := []string{"publish failed a", "publish failed a", "publish failed a", "publish a DELETED", "finalize r1"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	r.settled(t, want...)
	if n := entries(r.rep); n != 1 {
		t.Errorf("%d entries, want 1 (the DELETED sent)", n)
	}
}
