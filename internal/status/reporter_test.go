package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
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
	// alive: records (by UID) whose container the apiserver still has, whatever the
	// cache shows.
	alive   map[string]bool
	changed chan struct{}
	// events: the event id of every publish attempt, failed or not, in order.
	events []string
}

func newJournal() *journal {
	return &journal{changed: make(chan struct{}, 100), alive: map[string]bool{}}
}

func (j *journal) add(e string) {
	j.mu.Lock()
	j.entries = append(j.entries, e)
	j.mu.Unlock()
	j.changed <- struct{}{}
}

func (j *journal) Publish(_ context.Context, eventID, id string, st container.Status) error {
	j.mu.Lock()
	j.events = append(j.events, eventID)
	fail := j.failFirst > 0
	if fail {
		j.failFirst--
	}
	j.mu.Unlock()
	if fail {
		j.add("publish failed " + id)
		return errors.New("NATS is down")
	}
	j.add("publish " + id + " " + string(st.Status))
	return nil
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
func (j *journal) Gone(_ context.Context, _ string, r container.Record) (bool, error) {
	j.mu.Lock()
	alive := j.alive[string(r.UID)]
	j.mu.Unlock()
	if alive {
		j.add("not gone " + string(r.UID))
	}
	return !alive, nil
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
	src   *fakeSource
	out   *journal
	clock *clocktesting.FakeClock
	rep   *Reporter
	drain chan struct{}
	done  chan struct{}
}

func startReporter(t *testing.T, debounce time.Duration, failFirst int) *rig {
	t.Helper()
	r := &rig{
		src: &fakeSource{snaps: map[string]container.Snapshot{}}, out: newJournal(),
		clock: clocktesting.NewFakeClock(t0), drain: make(chan struct{}), done: make(chan struct{}),
	}
	r.out.failFirst = failFirst
	r.rep = NewReporter(r.src, r.out, r.out, Options{
		Debounce: debounce, MaxWait: 10 * debounce, DrainTimeout: time.Second, Workers: 1, Clock: r.clock, Settle: settle,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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

// Chaos seed 11: a leader whose watch was broken by an apiserver restart held a record
// already deleted (and the id created again). It must not send DELETED from that.
func TestReporterSendsNoDeletedTheApiserverDoesNotConfirm(t *testing.T) {
	r := startReporter(t, 0, 0)
	r.out.mu.Lock()
	r.out.alive["r1"] = true
	r.out.mu.Unlock()
	r.src.set("a", container.Snapshot{Record: record(owed)})
	r.out.waitFor(t, "not gone r1")
	// The cache catches up: now the apiserver agrees.
	r.out.mu.Lock()
	r.out.alive["r1"] = false
	r.out.mu.Unlock()
	r.src.set("a", container.Snapshot{Record: record(owed)})
	r.out.waitFor(t, "not gone r1", "publish a DELETED", "delete record r1")
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
