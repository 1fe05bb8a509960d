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
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/logtest"
)

// The reporter's machinery (debounce, queue, retries, drain, ordering of the cluster
// steps after the publish) on in-memory stand-ins for its three narrow interfaces and
// a fake clock. The real informers, NATS and cluster are exercised in tools/devenv/e2e/app.

type fakeSource struct {
	mu      sync.Mutex
	snaps   map[string]container.Snapshot
	handler func(id string)
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

// set stores a container's snapshot and tells the reporter, as an informer would.
func (s *fakeSource) set(id string, snap container.Snapshot) {
	s.mu.Lock()
	s.snaps[id] = snap
	h := s.handler
	s.mu.Unlock()
	h(id)
}

// journal records, in order, everything the reporter did to the outside world.
type journal struct {
	mu        sync.Mutex
	entries   []string
	failFirst int // publishes to fail before one succeeds
	// unstored: publishes go out with no stream storing them (core NATS).
	unstored bool
	// src is what the caches show; api, per id, what the apiserver has when it differs
	// (a cache that is behind). Confirmed answers api's, else the cache's.
	src     *fakeSource
	api     map[string]container.Snapshot
	changed chan struct{}
	// events: the event id of every publish attempt, failed or not, in order.
	events []string
}

func newJournal() *journal {
	return &journal{changed: make(chan struct{}, 100), api: map[string]container.Snapshot{}}
}

func (j *journal) add(e string) {
	j.mu.Lock()
	j.entries = append(j.entries, e)
	j.mu.Unlock()
	j.changed <- struct{}{}
}

func (j *journal) Publish(_ context.Context, eventID, id string, st container.Status) (bool, error) {
	j.mu.Lock()
	j.events = append(j.events, eventID)
	fail := j.failFirst > 0
	if fail {
		j.failFirst--
	}
	stored := !j.unstored
	j.mu.Unlock()
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
func (j *journal) EnsureRecord(_ context.Context, id, inc string, owed bool) error {
	j.add(fmt.Sprintf("record %s %q owed=%v", id, inc, owed))
	return nil
}
func (j *journal) DeleteService(_ context.Context, s *container.Service) error {
	j.add("delete service " + s.Name)
	return nil
}
func (j *journal) DeleteRecord(_ context.Context, r container.Record) error {
	j.add("delete record " + string(r.UID))
	return nil
}
func (j *journal) Confirmed(_ context.Context, id string) (container.Snapshot, error) {
	j.mu.Lock()
	snap, behind := j.api[id]
	j.mu.Unlock()
	if !behind {
		return j.src.Snapshot(id), nil
	}
	j.add("apiserver differs " + id)
	return snap, nil
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
	logs  *logtest.Buffer // what the reporter logged (every level)
	src   *fakeSource
	out   *journal
	clock *clocktesting.FakeClock
	rep   *Reporter
	drain chan struct{}
	done  chan struct{}
}

func startReporter(t *testing.T, debounce time.Duration, failFirst int) *rig {
	t.Helper()
	return startReporterWith(t, debounce, failFirst, nil)
}

// startReporterWith is startReporter with options changed by opts.
func startReporterWith(t *testing.T, debounce time.Duration, failFirst int, opts func(*Options)) *rig {
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
	r.rep = NewReporter(r.src, r.out, r.out, o, slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
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

// liveSnap is a live container with its record.
func liveSnap(name string) container.Snapshot {
	return container.Snapshot{Record: record(), Deployments: []*container.Deployment{dep(name)}}
}

func TestReporterDebouncesThenPublishes(t *testing.T) {
	r := startReporter(t, 100*time.Millisecond, 0)
	r.src.set("a", liveSnap("a-1"))
	r.src.set("a", liveSnap("a-1"))
	if n := r.rep.Pending(); n != 1 {
		t.Fatalf("pending %d, want the change held by the debounce", n)
	}
	r.clock.Step(100 * time.Millisecond)
	r.out.waitFor(t, "publish a PENDING")
}

func TestReporterRetriesWithBackoffAndSendsOnce(t *testing.T) {
	r := startReporter(t, 0, 2)
	r.src.set("a", liveSnap("a-1"))
	// Retries wait for the backoff (100 ms, doubling), on the clock.
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) },
		[]string{"publish failed a", "publish failed a", "publish a PENDING"})
}

// Issue 23: each retry minted a new event id, so neither JetStream (Nats-Msg-Id) nor
// DCM could drop a retry whose first attempt was stored but not acknowledged. The
// retries of one change share an id; a new change, a change back, and a republish
// each get a new one.
func TestReporterEventIDs(t *testing.T) {
	step := func(r *rig) func() { return func() { r.clock.Step(10 * time.Millisecond) } }
	t.Run("retries of one change share its id", func(t *testing.T) {
		r := startReporter(t, 0, 2)
		r.src.set("a", liveSnap("a-1"))
		r.out.await(t, step(r), []string{"publish failed a", "publish failed a", "publish a PENDING"})
		ev := r.out.eventIDs()
		if ev[0] == "" || ev[1] != ev[0] || ev[2] != ev[0] {
			t.Errorf("event ids %q, want one id for the three attempts", ev)
		}
	})
	t.Run("a change during the retries is a new event", func(t *testing.T) {
		r := startReporter(t, 0, 1)
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish failed a")
		r.src.set("a", container.Snapshot{Record: record(owed)})
		r.out.await(t, step(r), []string{"publish failed a", "publish a DELETED", "delete record r1"})
		if ev := r.out.eventIDs(); ev[1] == ev[0] {
			t.Errorf("event ids %q: PENDING and DELETED share one", ev)
		}
	})
	t.Run("a change back and a republish are new events", func(t *testing.T) {
		r := startReporter(t, 0, 0)
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish a PENDING")
		r.src.set("a", container.Snapshot{Record: record(owed)})
		r.out.waitFor(t, "publish a PENDING", "publish a DELETED", "delete record r1")
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish a PENDING", "publish a DELETED", "delete record r1", "publish a PENDING")
		r.rep.RepublishAll()
		r.out.waitFor(t, "publish a PENDING", "publish a DELETED", "delete record r1", "publish a PENDING", "publish a PENDING")
		ev := r.out.eventIDs()
		if len(ev) != 4 || len(map[string]bool{ev[0]: true, ev[1]: true, ev[2]: true, ev[3]: true}) != 4 {
			t.Errorf("event ids %q, want four different ones", ev)
		}
	})
	t.Run("a republish during the retries is a new event", func(t *testing.T) {
		r := startReporter(t, 0, 1)
		r.src.set("a", liveSnap("a-1"))
		r.out.waitFor(t, "publish failed a")
		r.rep.RepublishAll()
		r.out.await(t, step(r), []string{"publish failed a", "publish a PENDING"})
		if ev := r.out.eventIDs(); ev[1] == ev[0] {
			t.Errorf("event ids %q: the republish reused the failed attempt's", ev)
		}
	})
}

func (j *journal) eventIDs() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

func TestReporterDeletesTheRecordOnlyAfterDeletedIsDelivered(t *testing.T) {
	r := startReporter(t, 0, 1)
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish failed a")
	r.src.set("a", container.Snapshot{Record: record(owed)})
	// The retry sends the newest state (DELETED), and only then is the record deleted.
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) },
		[]string{"publish failed a", "publish a DELETED", "delete record r1"})
}

// Issue 23 item 1: no destructive step on a cache alone. Each race is a cache that is
// behind the apiserver; while it is, the reporter does nothing (and keeps the container
// owed), and once the cache catches up it does what the apiserver's state asks for.
// (Before the fix, only a record-deleting DELETED was confirmed: the first two rows
// deleted the Service and published DELETED, and re-created the record and published
// PENDING.)
func TestReporterTakesNoDestructiveStepTheApiserverDoesNotConfirm(t *testing.T) {
	svcUID := func(s *container.Service) *container.Service { s.UID = "s1"; return s }
	liveWithService := container.Snapshot{Record: record(), Deployments: []*container.Deployment{dep("a-1")},
		Services: []*container.Service{svcUID(svc("a-s"))}}
	reserved := container.Snapshot{
		Record:      record(func(rec *container.Record) { rec.UID, rec.Incarnation = "r2", "i2" }),
		Deployments: []*container.Deployment{dep("a-2", incarnation("i2"))},
	}
	for _, tc := range []struct {
		name string
		// delivered: a status delivered before the race (nil: a new leader, nothing sent).
		delivered *container.Snapshot
		cache     container.Snapshot
		apiserver container.Snapshot
		// after: what the reporter does once the cache shows what the apiserver has.
		after []string
	}{
		{"(a) the cache shows a live container's Service, not yet its record and Deployment: no Service deleted, no DELETED",
			&liveWithService, container.Snapshot{Services: liveWithService.Services}, liveWithService, nil},
		{"(a) same, nothing sent before: no Service deleted",
			nil, container.Snapshot{Services: liveWithService.Services}, liveWithService, []string{"publish a PENDING"}},
		{"(b) a new leader's cache still shows a Deployment deleted at the apiserver, its record gone: no record re-created, no PENDING",
			nil, container.Snapshot{Deployments: []*container.Deployment{dep("a-1")}}, container.Snapshot{}, nil},
		{"(c) the id was reserved again (another record): no DELETED, the old record not deleted",
			nil, container.Snapshot{Record: record(owed)}, reserved, []string{"publish a PENDING"}},
		{"(c) the record is gone (its DELETED was delivered): not sent again",
			nil, container.Snapshot{Record: record(owed)}, container.Snapshot{}, nil},
		{"(c) a Deployment of the id lives (the cache is behind): no DELETED",
			nil, container.Snapshot{Record: record(created(time.Hour))},
			container.Snapshot{Record: record(created(time.Hour)), Deployments: []*container.Deployment{live}},
			[]string{"publish a PENDING"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startReporter(t, 0, 0)
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
			r.out.waitFor(t, append(want, tc.after...)...)
			for r.rep.Pending() != 0 {
				r.clock.Step(10 * time.Millisecond)
				time.Sleep(time.Millisecond)
			}
			r.out.waitFor(t, append(want, tc.after...)...)
		})
	}
}

// The reporter's own state agrees with the apiserver once its cache catches up: with
// the apiserver as the cache shows it, a DELETED is sent and the record deleted.
func TestReporterActsOnAConfirmedPlan(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.src.set("a", container.Snapshot{Record: record(), Services: []*container.Service{svc("a-s")}, Deployments: []*container.Deployment{dep("a-1", deleting)}})
	r.clock.Step(time.Hour)
	r.out.await(t, func() { r.clock.Step(time.Second) },
		[]string{`record a "i1" owed=true`, "delete service a-s", "publish a DELETED", "delete record r1"})
}

// Issue 23 item 6: with no stream capturing dcm.container a DELETED goes out on plain
// NATS, where nobody may have read it: its record stays (DELETED still owed, retried
// with backoff and counted as pending) until a stream stores one.
func TestReporterKeepsTheRecordOfAnUnstoredDeleted(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.out.unstored = true
	r.src.set("a", container.Snapshot{Record: record(owed)})
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
	// A stream now captures the subject.
	r.out.mu.Lock()
	r.out.unstored = false
	r.out.mu.Unlock()
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) },
		[]string{"publish unstored a DELETED", "publish unstored a DELETED", "publish a DELETED", "delete record r1"})
	for r.rep.Pending() != 0 {
		r.clock.Step(10 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
}

// A live status needs no stream: it is not retried when plain NATS carried it.
func TestReporterSendsLiveStatusesOnPlainNATS(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.out.unstored = true
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish unstored a PENDING")
	for r.rep.Pending() != 0 {
		time.Sleep(time.Millisecond)
	}
}

// Chaos seed 14: an id re-created and deleted while the leader's cache was behind; the
// leader only ever saw the new container's record, owed, and the last status it had
// sent for the id was the previous container's DELETED. The new one's DELETED is sent.
func TestReporterSendsTheDeletedOfEachIncarnation(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.src.set("a", container.Snapshot{Record: record(owed)})
	r.out.waitFor(t, "publish a DELETED", "delete record r1")
	r.src.set("a", container.Snapshot{Record: record(owed, func(rec *container.Record) { rec.UID, rec.Incarnation = "r2", "i2" })})
	r.out.waitFor(t, "publish a DELETED", "delete record r1", "publish a DELETED", "delete record r2")
}

func TestReporterRestoresARecordDeletedByHand(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.src.set("ref", container.Snapshot{Deployments: []*container.Deployment{dep("ref-1")}})
	r.out.waitFor(t, `record ref "i1" owed=false`, "publish ref PENDING")
}

func TestReporterLooksAgainAtARecordWithoutDeployment(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.src.set("a", container.Snapshot{Record: record()}) // written at t0, settles at t0+40s
	r.clock.Step(39 * time.Second)
	r.out.waitFor(t)
	// No Deployment came: the create died. The container counts as gone.
	r.out.await(t, func() { r.clock.Step(100 * time.Millisecond) },
		[]string{`record a "i1" owed=true`, "publish a DELETED", "delete record r1"})
}

func TestReporterDrainDeliversWhatTheDebounceHolds(t *testing.T) {
	r := startReporter(t, time.Hour, 0)
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

func TestReporterRepublishSendsUnchangedStatusAgain(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish a PENDING")
	r.src.set("a", liveSnap("a-1")) // unchanged: nothing
	r.rep.RepublishAll()
	r.out.waitFor(t, "publish a PENDING", "publish a PENDING")
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
func TestReporterLogsAnOutageOnce(t *testing.T) {
	r := startReporter(t, 0, 60)
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

// A container held back while the cache is behind is one log line, not one per look.
func TestReporterLogsAHeldBackContainerOnce(t *testing.T) {
	r := startReporter(t, 0, 0)
	logs := &lines{counts: map[slog.Level]int{}}
	r.rep.log = slog.New(logs)
	r.out.setAPI("a", liveSnap("a-1"))
	r.src.set("a", container.Snapshot{Services: []*container.Service{svc("a-s")}})
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
func TestReporterLogsWhatTheStatusWithholds(t *testing.T) {
	r := startReporter(t, 0, 0)
	kubelet := `failed to pull and unpack image "10.0.0.1:22/x:v1": dial tcp 10.0.0.1:22: connect: connection refused`
	p := container.PodOf(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{container.LabelIncarnation: "i1"}},
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
