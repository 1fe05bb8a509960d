package freshness

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
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

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "2"}}
}
