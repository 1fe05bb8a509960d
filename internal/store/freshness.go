package store

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Freshness: each cache knows whether its watch is healthy, so a read never answers from
// a cache that has been out of date for longer than a known bound.
//
// A reflector (client-go's list-and-watch loop under each informer) recovers from a
// failed watch on its own backoff: 0.8 s doubling up to 30 s, with up to as much again
// of jitter, so after an outage one cache can stay behind for a minute while the others
// are current, and nothing but its log says so. Each informer's ListerWatcher is
// therefore wrapped (trackedLW) and reports what happens to it: lists, watches opened,
// events, bookmarks, and watches that end or fail to open. cacheState is what those say,
// a pure function of the signals and the time, and lag judges it:
//
//   - disconnected (no watch open, or one just opened that has not shown it works): the
//     cache may have missed every change since the watch broke, or since its last list.
//     It is behind once that has lasted longer than MaxStaleness (SP_K8S_MAX_STALENESS,
//     5 s by default). A watch the apiserver closes on its timeout (every 5-10 minutes)
//     is replaced within milliseconds, so only a real outage lasts that long.
//   - connected: a watch is open and has shown it works. It is behind when it has been
//     silent (no event, no bookmark) for longer than SilenceBound. The apiserver sends
//     every watch a bookmark about once a minute (measured against kube-apiserver
//     v1.37.2: the first 59.5 s after the watch opened, then every 60 s), so a longer
//     silence means the stream hangs although its connection stays up (the HTTP/2
//     health check of client-go, a ping after 30 s of silence and 15 s to answer, closes
//     a connection that is dead, which is the disconnected case).
//
// A watch "shows it works" with its first event or bookmark, or by staying open for
// watchSettle without failing: a watch resumed from a resource version the apiserver
// has compacted away answers 410 Gone at once, and until the reflector has re-listed,
// its cache is as old as the outage before.

// SilenceBound is how long a connected watch may be silent before its cache counts as
// behind: the apiserver's bookmarks come every 60 s, so 90 s is one missed bookmark and
// half an interval of slack.
const SilenceBound = 90 * time.Second

// DefaultMaxStaleness is Store.MaxStaleness unless set (SP_K8S_MAX_STALENESS).
const DefaultMaxStaleness = 5 * time.Second

// StaleRetryAfter is the Retry-After (seconds) of a read refused because a cache is
// behind: the reflector retries a failed watch within 0.8-1.6 s at first.
const StaleRetryAfter = 2

// watchSettle is how long a watch opened after a gap must stay open, without an event,
// to count as working: the apiserver answers a watch from a compacted resource version
// with 410 Gone within milliseconds.
const watchSettle = time.Second

// The caches, in the order they are reported.
const (
	CacheDeployments = "deployments"
	CachePods        = "pods"
	CacheServices    = "services"
	CacheRecords     = "records"
)

// Caches names every cache (the metrics label values).
var Caches = []string{CacheDeployments, CachePods, CacheServices, CacheRecords}

// cacheTitle is how a message names a cache.
var cacheTitle = map[string]string{
	CacheDeployments: "Deployments", CachePods: "Pods", CacheServices: "Services", CacheRecords: "container records",
}

// signal is one thing a cache's ListerWatcher saw.
type signal int

const (
	sigListed          signal = iota // a List returned its last page
	sigListFailed                    // a List failed
	sigWatchOpened                   // a Watch returned a watch (resuming from a resource version)
	sigWatchListOpened               // a Watch returned a watch that first sends the whole state (watch-list)
	sigWatchFailed                   // a Watch call failed
	sigEvent                         // an added, modified or deleted object
	sigBookmark                      // a bookmark
	sigInitialEnd                    // the bookmark that ends a watch-list's initial events
	sigWatchEnded                    // an error event, or the watch's channel closed, or it was stopped
)

// cacheState is what one cache's signals say about it. Signals of a watch that is not the
// open one (its id differs) are ignored: the reflector may stop an old watch after it has
// opened a new one.
type cacheState struct {
	synced  bool      // a list (or a watch-list's initial events) has completed
	open    bool      // a watch is open
	id      uint64    // of the open watch
	initial bool      // the open watch is still sending its initial events
	opened  time.Time // when the open watch opened
	proven  bool      // the open watch has sent an event or bookmark (past its initial events)
	heard   time.Time // the last list, event or bookmark: the cache was current then
	// down is when the cache stopped being proven current: the watch broke, or the last
	// list (it holds until a watch shows it works). Zero while a proven watch is open.
	down time.Time
}

// apply is the state after signal sig of watch id (0 for list signals) at now.
func (c cacheState) apply(sig signal, id uint64, now time.Time) cacheState {
	switch sig {
	case sigListed:
		c.synced, c.heard, c.down = true, now, now
	case sigListFailed, sigWatchFailed:
		if !c.open && c.down.IsZero() {
			c.down = now
		}
	case sigWatchOpened, sigWatchListOpened:
		c.open, c.id, c.opened, c.proven = true, id, now, false
		c.initial = sig == sigWatchListOpened
		if c.down.IsZero() {
			c.down = now
		}
	case sigEvent, sigBookmark, sigInitialEnd:
		if !c.open || id != c.id {
			break
		}
		if c.initial {
			if sig != sigInitialEnd {
				break // the cache is replaced only once the initial events are all in
			}
			c.initial, c.synced = false, true
		}
		c.proven, c.heard, c.down = true, now, time.Time{}
	case sigWatchEnded:
		if !c.open || id != c.id {
			break
		}
		settled := c.settled(now)
		c.open, c.initial = false, false
		if settled {
			c.down = now
		} // else the gap before this watch goes on: it never showed it works
	}
	return c
}

// settled: the open watch works (see watchSettle).
func (c cacheState) settled(now time.Time) bool {
	return c.open && (c.proven || !c.initial && now.Sub(c.opened) >= watchSettle)
}

// lag judges the cache at now: since is when it may have started missing changes (zero
// when it is current), behind whether that is past the bound, why says how.
func (c cacheState) lag(now time.Time, maxStaleness, silence time.Duration) (since time.Time, behind bool, why string) {
	switch {
	case !c.synced:
		return time.Time{}, false, "" // not loaded yet: reads answer 503 for that already
	case c.settled(now):
		last := c.heard
		if c.opened.After(last) {
			last = c.opened
		}
		if now.Sub(last) > silence {
			return last, true, "its watch is connected but has sent nothing, not even a bookmark"
		}
		return time.Time{}, false, ""
	case c.open && c.initial:
		return c.down, now.Sub(c.down) > maxStaleness, "its watch is re-listing"
	case c.open:
		return c.down, now.Sub(c.down) > maxStaleness, "its watch is reconnecting"
	}
	return c.down, now.Sub(c.down) > maxStaleness, "its watch is disconnected"
}

// freshness tracks one cache.
type freshness struct {
	name string
	now  func() time.Time
	log  *slog.Logger // nil: no log

	mu     sync.Mutex
	state  cacheState
	lastID uint64
	// behind is what the last judgement said, so the log says once when the cache
	// falls behind and once when it is current again (judged by every read, probe and
	// scrape, so within seconds of the change).
	behind      bool
	behindSince time.Time
}

func (f *freshness) note(sig signal, id uint64) {
	f.mu.Lock()
	f.state = f.state.apply(sig, id, f.now())
	f.mu.Unlock()
}

func (f *freshness) nextID() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastID++
	return f.lastID
}

func (f *freshness) lag(maxStaleness, silence time.Duration) Lag {
	if f == nil { // a Store not made by New
		return Lag{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	since, behind, why := f.state.lag(now, maxStaleness, silence)
	l := Lag{Cache: f.name, Behind: behind, Why: why}
	if !since.IsZero() {
		l.Since, l.For = since, now.Sub(since)
	}
	if behind != f.behind && f.log != nil {
		if behind {
			f.log.Warn("cache behind: reads that need it answer 503 and /readyz fails until its watch is back",
				"cache", f.name, "since", since, "why", why)
		} else {
			f.log.Info("cache current again", "cache", f.name, "behind_since", f.behindSince)
		}
	}
	f.behind, f.behindSince = behind, since
	return l
}

// Lag is how far behind one cache may be.
type Lag struct {
	Cache string // deployments, pods, services or records
	// Since is when the cache may have started missing changes (zero when current); For
	// is how long ago that was.
	Since time.Time
	For   time.Duration
	// Behind: For is past the bound (MaxStaleness when disconnected, SilenceBound when
	// connected but silent); reads that need the cache answer 503.
	Behind bool
	Why    string
}

func (l Lag) String() string {
	return fmt.Sprintf("%s out of date since %s (%s): %s", cacheTitle[l.Cache],
		l.Since.UTC().Format(time.RFC3339), l.For.Round(time.Second), l.Why)
}

// Lags reports every cache, in the order of Caches.
func (s *Store) Lags() []Lag {
	out := make([]Lag, 0, len(s.fresh))
	for _, name := range Caches {
		out = append(out, s.fresh[name].lag(s.MaxStaleness, s.SilenceBound))
	}
	return out
}

// Lag reports one cache (a name of Caches).
func (s *Store) Lag(cache string) Lag {
	f, ok := s.fresh[cache]
	if !ok {
		return Lag{Cache: cache}
	}
	return f.lag(s.MaxStaleness, s.SilenceBound)
}

// Behind lists the caches that are behind (none when all are current).
func (s *Store) Behind() []Lag {
	return slices.DeleteFunc(s.Lags(), func(l Lag) bool { return !l.Behind })
}

// readCaches are the caches GET and LIST answer from (a miss asks the apiserver for the
// record, so records is not one).
var readCaches = []string{CacheDeployments, CachePods, CacheServices}

// checkFresh refuses a read when a cache it needs is behind: a 503 naming the cache,
// since a 200 from it could show a container as it was before the cache broke.
func (s *Store) checkFresh() error {
	var names []string
	var worst Lag
	for _, name := range readCaches {
		l := s.fresh[name].lag(s.MaxStaleness, s.SilenceBound)
		if !l.Behind {
			continue
		}
		names = append(names, cacheTitle[name])
		if l.For > worst.For {
			worst = l
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &Error{Kind: KindUnavailable, RetryAfter: StaleRetryAfter, Err: fmt.Errorf("stale cache: %s", worst),
		Message: fmt.Sprintf("this replica's view of %s has been out of date for %d s; retry later (another replica may answer)",
			strings.Join(names, " and "), int(worst.For.Seconds()))}
}

// trackedLW is a cache's ListerWatcher that reports what happens to it (see freshness).
type trackedLW struct {
	lw cache.ListerWatcher
	f  *freshness
}

func (t *trackedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return t.ListWithContext(context.Background(), opts)
}

func (t *trackedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return t.WatchWithContext(context.Background(), opts)
}

func (t *trackedLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	obj, err := cache.ToListerWithContext(t.lw).ListWithContext(ctx, opts)
	switch {
	case err != nil:
		t.f.note(sigListFailed, 0)
	case lastPage(obj):
		t.f.note(sigListed, 0)
	}
	return obj, err
}

// lastPage: a list the reflector reads in pages is complete with the page without a
// continue token.
func lastPage(obj runtime.Object) bool {
	l, err := meta.ListAccessor(obj)
	return err != nil || l.GetContinue() == ""
}

func (t *trackedLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := cache.ToWatcherWithContext(t.lw).WatchWithContext(ctx, opts)
	if err != nil {
		t.f.note(sigWatchFailed, 0)
		return nil, err
	}
	id := t.f.nextID()
	sig := sigWatchOpened
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		sig = sigWatchListOpened
	}
	t.f.note(sig, id)
	tw := &trackedWatch{inner: w, f: t.f, id: id, out: make(chan watch.Event), done: make(chan struct{})}
	go tw.run()
	return tw, nil
}

// IsWatchListSemanticsUnSupported keeps the wrapped client's answer: the reflector asks,
// and a fake clientset says it cannot stream a list.
func (t *trackedLW) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(t.lw)
}

// trackedWatch passes a watch's events on, reporting each first.
type trackedWatch struct {
	inner watch.Interface
	f     *freshness
	id    uint64
	out   chan watch.Event
	done  chan struct{}
	once  sync.Once
}

func (w *trackedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop ends the watch; its end is reported before Stop returns, so it always comes
// before the next watch's opening.
func (w *trackedWatch) Stop() {
	w.once.Do(func() {
		w.f.note(sigWatchEnded, w.id)
		close(w.done)
		w.inner.Stop()
	})
}

func (w *trackedWatch) run() {
	defer close(w.out)
	in := w.inner.ResultChan()
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-in:
		case <-w.done:
			return
		}
		if !ok {
			// Reported before the reflector sees the channel close, so before it opens
			// the next watch.
			w.f.note(sigWatchEnded, w.id)
			return
		}
		w.f.note(signalOf(ev), w.id)
		select {
		case w.out <- ev:
		case <-w.done:
			return
		}
	}
}

// signalOf is what a watch event says about the cache.
func signalOf(ev watch.Event) signal {
	switch ev.Type {
	case watch.Error:
		return sigWatchEnded // the reflector ends the watch on it
	case watch.Bookmark:
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			return sigInitialEnd
		}
		return sigBookmark
	}
	return sigEvent
}
