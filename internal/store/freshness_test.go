package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// The judgement of one cache is a pure function of what its ListerWatcher saw, and when.
func TestCacheLag(t *testing.T) {
	const G, S = 5 * time.Second, 90 * time.Second
	type step struct {
		at  time.Duration // since the start
		sig signal
		id  uint64
	}
	// A cache listed at 0 whose watch 1 opened at 0.1 s.
	listedAndWatching := []step{{0, sigListed, 0}, {100 * time.Millisecond, sigWatchOpened, 1}}
	seq := func(steps ...[]step) []step {
		var out []step
		for _, s := range steps {
			out = append(out, s...)
		}
		return out
	}
	never := time.Duration(-1)
	for _, tc := range []struct {
		name   string
		steps  []step
		now    time.Duration
		behind bool
		since  time.Duration // -1: current
		why    string
	}{
		{"nothing yet: not loaded, not judged", nil, time.Hour, false, never, ""},
		{"list failing from the start: not loaded, not judged", []step{{0, sigListFailed, 0}}, time.Hour, false, never, ""},
		{"listed, no watch yet: current as of the list", []step{{0, sigListed, 0}}, G, false, 0, "disconnected"},
		{"listed, no watch for longer than G", []step{{0, sigListed, 0}}, G + time.Millisecond, true, 0, "disconnected"},
		{"watch just opened, nothing sent: as old as the list", listedAndWatching, 500 * time.Millisecond, false, 0, "reconnecting"},
		{"watch open a second without failing: connected", listedAndWatching, 2 * time.Second, false, never, ""},
		{"connected and silent up to S", listedAndWatching, 100*time.Millisecond + S, false, never, ""},
		{"connected and silent past S: behind since it opened", listedAndWatching, 100*time.Millisecond + S + time.Millisecond, true, 100 * time.Millisecond, "sent nothing"},
		{"an event restarts the silence", seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}}),
			60*time.Second + S, false, never, ""},
		{"a bookmark restarts the silence", seq(listedAndWatching, []step{{60 * time.Second, sigBookmark, 1}}),
			60*time.Second + S + time.Second, true, 60 * time.Second, "sent nothing"},
		{"watch closed and reopened at once: no outage",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {300 * time.Second, sigWatchEnded, 1}, {300*time.Second + 5*time.Millisecond, sigWatchOpened, 2}}),
			302 * time.Second, false, never, ""},
		{"watch ended: disconnected since then, not behind within G",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {70 * time.Second, sigWatchEnded, 1}}),
			70*time.Second + G, false, 70 * time.Second, "disconnected"},
		{"watch ended, new watches failing: behind after G",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {70 * time.Second, sigWatchEnded, 1},
				{71 * time.Second, sigWatchFailed, 0}, {73 * time.Second, sigListFailed, 0}}),
			70*time.Second + G + time.Millisecond, true, 70 * time.Second, "disconnected"},
		{"a relist after the outage makes it current as of the list",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {70 * time.Second, sigWatchEnded, 1},
				{100 * time.Second, sigListed, 0}, {100*time.Second + 5*time.Millisecond, sigWatchOpened, 2}}),
			100*time.Second + 10*time.Millisecond, false, 100 * time.Second, "reconnecting"},
		{"a watch resumed after an outage answers 410 at once: the outage goes on",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {70 * time.Second, sigWatchEnded, 1},
				{90 * time.Second, sigWatchOpened, 2}, {90*time.Second + 3*time.Millisecond, sigWatchEnded, 2}}),
			91 * time.Second, true, 70 * time.Second, "disconnected"},
		{"a resumed watch that sends an event is connected at once",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {70 * time.Second, sigWatchEnded, 1},
				{90 * time.Second, sigWatchOpened, 2}, {90*time.Second + 3*time.Millisecond, sigEvent, 2}}),
			90*time.Second + 4*time.Millisecond, false, never, ""},
		{"a resumed watch, quiet, still unproven: the outage goes on",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {70 * time.Second, sigWatchEnded, 1},
				{90 * time.Second, sigWatchOpened, 2}}),
			90*time.Second + 500*time.Millisecond, true, 70 * time.Second, "reconnecting"},
		{"a resumed watch, quiet for watchSettle: connected",
			seq(listedAndWatching, []step{{60 * time.Second, sigEvent, 1}, {70 * time.Second, sigWatchEnded, 1},
				{90 * time.Second, sigWatchOpened, 2}}),
			91 * time.Second, false, never, ""},
		{"the end of an old watch after the next one opened is ignored",
			seq(listedAndWatching, []step{{60 * time.Second, sigWatchOpened, 2}, {60*time.Second + time.Millisecond, sigWatchEnded, 1}}),
			70 * time.Second, false, never, ""},
		{"events of an old watch do not count",
			seq(listedAndWatching, []step{{10 * time.Second, sigWatchEnded, 1}, {11 * time.Second, sigEvent, 1}}),
			16 * time.Second, true, 10 * time.Second, "disconnected"},
		{"watch-list: initial events do not make it current",
			[]step{{0, sigListed, 0}, {10 * time.Second, sigWatchEnded, 0}, {20 * time.Second, sigWatchFailed, 0},
				{30 * time.Second, sigWatchListOpened, 1}, {30*time.Second + time.Millisecond, sigEvent, 1}},
			40 * time.Second, true, 0, "re-listing"},
		{"watch-list: its end bookmark does",
			[]step{{0, sigListed, 0}, {30 * time.Second, sigWatchListOpened, 1}, {30*time.Second + time.Millisecond, sigEvent, 1},
				{31 * time.Second, sigInitialEnd, 1}},
			40 * time.Second, false, never, ""},
		{"watch-list first load: loaded once its initial events are in",
			[]step{{0, sigWatchListOpened, 1}, {time.Second, sigEvent, 1}, {2 * time.Second, sigInitialEnd, 1}, {3 * time.Second, sigWatchEnded, 1}},
			9 * time.Second, true, 3 * time.Second, "disconnected"},
		{"watch-list first load, initial events not all in: not loaded yet",
			[]step{{0, sigWatchListOpened, 1}, {time.Second, sigEvent, 1}},
			time.Hour, false, never, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var c cacheState
			for _, s := range tc.steps {
				c = c.apply(s.sig, s.id, start.Add(s.at))
			}
			since, behind, why := c.lag(start.Add(tc.now), G, S)
			wantSince := time.Time{}
			if tc.since != never {
				wantSince = start.Add(tc.since)
			}
			if behind != tc.behind || !since.Equal(wantSince) || !strings.Contains(why, tc.why) {
				t.Errorf("lag = since %v, behind %v, %q; want since %v, behind %v, %q", since.Sub(start), behind, why, tc.since, tc.behind, tc.why)
			}
		})
	}
}

// The wrapped ListerWatcher reports what the reflector does with it, and reads refuse a
// cache past the bound: a real informer over a scripted list and watch, on a fake clock.
func TestTrackedInformer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := &freshness{name: CachePods, now: clk.Now}
	s := &Store{fresh: map[string]*freshness{}, MaxStaleness: 5 * time.Second, SilenceBound: SilenceBound}
	for _, name := range Caches {
		s.fresh[name] = &freshness{name: name, now: clk.Now}
	}
	s.fresh[CachePods] = f
	sl := newScriptedLW()
	inf := cache.NewSharedIndexInformer(&trackedLW{lw: sl, f: f}, &corev1.Pod{}, 0, cache.Indexers{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	w1 := sl.nextWatch(t, ctx)
	wait := func(what string, cond func(Lag) bool) Lag {
		t.Helper()
		for {
			if l := f.lag(s.MaxStaleness, s.SilenceBound); cond(l) {
				return l
			}
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s: %+v", what, f.lag(s.MaxStaleness, s.SilenceBound))
			case <-time.After(time.Millisecond):
			}
		}
	}
	w1.Add(pod("1"))
	wait("the event", func(Lag) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.state.proven
	})
	if err := s.checkFresh(); err != nil {
		t.Fatalf("connected cache refused: %v", err)
	}

	// The watch breaks; the next lists and watches fail.
	sl.failWatches(true)
	clk.Step(10 * time.Second)
	broke := clk.Now()
	w1.Stop() // the server closed it
	wait("disconnected", func(l Lag) bool { return !l.Since.IsZero() })
	clk.Step(5 * time.Second)
	if l := f.lag(s.MaxStaleness, s.SilenceBound); l.Behind || !l.Since.Equal(broke) {
		t.Fatalf("after G: %+v, want not yet behind, since %v", l, broke)
	}
	clk.Step(time.Second)
	if l := f.lag(s.MaxStaleness, s.SilenceBound); !l.Behind || !l.Since.Equal(broke) || l.For != 6*time.Second {
		t.Fatalf("past G: %+v, want behind for 6 s", l)
	}
	err := s.checkFresh()
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindUnavailable || se.RetryAfter == 0 ||
		se.Message != "this replica's view of Pods has been out of date for 6 s; retry later (another replica may answer)" {
		t.Fatalf("read past G: %v", err)
	}
	if got := s.Behind(); len(got) != 1 || got[0].Cache != CachePods || !strings.HasPrefix(got[0].String(), "Pods out of date since 2026-01-01T00:00:10Z (6s): its watch is disconnected") {
		t.Fatalf("Behind() = %v", got)
	}

	// The apiserver answers again: the reflector's retry (on a real clock: it backs off on
	// its own timer) opens a watch that sends an event.
	sl.failWatches(false)
	w2 := sl.nextWatch(t, ctx)
	w2.Modify(pod("1"))
	wait("current again", func(l Lag) bool { return !l.Behind && l.Since.IsZero() })
	if err := s.checkFresh(); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "2"}}
}

// scriptedLW lists one empty page and hands out fake watches, or, while failing, refuses
// both.
type scriptedLW struct {
	mu      sync.Mutex
	failing bool
	watches chan *watch.FakeWatcher
}

func newScriptedLW() *scriptedLW { return &scriptedLW{watches: make(chan *watch.FakeWatcher, 100)} }

func (l *scriptedLW) failWatches(on bool) {
	l.mu.Lock()
	l.failing = on
	l.mu.Unlock()
}

func (l *scriptedLW) List(metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return nil, apierrors.NewServiceUnavailable("scripted outage")
	}
	return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
}

func (l *scriptedLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing || ptr.Deref(o.SendInitialEvents, false) {
		return nil, apierrors.NewServiceUnavailable("scripted outage")
	}
	w := watch.NewFake()
	l.watches <- w
	return w, nil
}

func (l *scriptedLW) nextWatch(t *testing.T, ctx context.Context) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-l.watches:
		return w
	case <-ctx.Done():
		t.Fatal("no watch opened")
	}
	return nil
}

// The scripted client cannot stream a list: the reflector lists, then watches.
func (*scriptedLW) IsWatchListSemanticsUnSupported() bool { return true }

// What each watch event says about the cache.
func TestSignalOf(t *testing.T) {
	endOfInitial := pod("")
	endOfInitial.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	for _, tc := range []struct {
		name string
		ev   watch.Event
		want signal
	}{
		{"added", watch.Event{Type: watch.Added, Object: pod("a")}, sigEvent},
		{"modified", watch.Event{Type: watch.Modified, Object: pod("a")}, sigEvent},
		{"deleted", watch.Event{Type: watch.Deleted, Object: pod("a")}, sigEvent},
		{"bookmark", watch.Event{Type: watch.Bookmark, Object: pod("")}, sigBookmark},
		{"end of a watch-list's initial events", watch.Event{Type: watch.Bookmark, Object: endOfInitial}, sigInitialEnd},
		{"error (410 Gone, a broken stream): the reflector ends the watch",
			watch.Event{Type: watch.Error, Object: &metav1.Status{Code: 410}}, sigWatchEnded},
	} {
		if got := signalOf(tc.ev); got != tc.want {
			t.Errorf("%s: signal %d, want %d", tc.name, got, tc.want)
		}
	}
}
