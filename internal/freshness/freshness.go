// Package freshness tells whether an informer cache is current, so a read never answers
// from a cache that has been stale for longer than a known bound.
//
// Tracker.Wrap wraps each reflector's ListerWatcher to see its lists, watches, events,
// bookmarks and failures; cacheState folds them and Tracker.Lag judges:
//
//   - disconnected (no watch open, or one not yet shown to work): behind once that
//     outlasts the staleness bound (SP_K8S_MAX_STALENESS);
//   - connected: behind once silent (no event, no bookmark) past SilenceBound, since the
//     apiserver bookmarks every watch about once a minute.
//
// A watch shows it works with an event or bookmark, or by staying open for watchSettle:
// one resumed from a compacted resource version fails with 410 Gone at once.
package freshness

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// SilenceBound is how long a connected watch may be silent before its cache is behind:
// one missed bookmark plus half a bookmark interval of slack.
const SilenceBound = 90 * time.Second

// DefaultMaxStaleness is the staleness bound unless SP_K8S_MAX_STALENESS sets one.
const DefaultMaxStaleness = 5 * time.Second

// watchSettle is how long a watch opened after a gap must stay open to count as working:
// the apiserver fails a watch from a compacted resource version with 410 Gone at once.
const watchSettle = time.Second

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

// cacheState is what one cache's signals say. Signals of a watch other than the open one
// are ignored: the reflector may stop an old watch after opening a new one.
type cacheState struct {
	synced  bool      // a list (or a watch-list's initial events) has completed
	open    bool      // a watch is open
	id      uint64    // of the open watch
	initial bool      // the open watch is still sending its initial events
	opened  time.Time // when the open watch opened
	proven  bool      // the open watch has sent an event or bookmark (past its initial events)
	heard   time.Time // the last list, event or bookmark: the cache was current then
	// down is since when the cache is unproven (watch broke, or last list); zero while proven.
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

// lag judges the cache at now: since when it may miss changes, whether too long, and why.
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

// Tracker tracks one cache.
type Tracker struct {
	name, title string
	now         func() time.Time
	log         *slog.Logger // nil: no log

	mu     sync.Mutex
	state  cacheState
	lastID uint64
	// behind is the last judgement, so falling behind and recovering are each logged once.
	behind      bool
	behindSince time.Time
}

// NewTracker tracks cache name (the metrics label; title names it in messages) on clock
// now; log, if not nil, says when it falls behind and recovers.
func NewTracker(name, title string, now func() time.Time, log *slog.Logger) *Tracker {
	return &Tracker{name: name, title: title, now: now, log: log}
}

func (f *Tracker) note(sig signal, id uint64) {
	f.mu.Lock()
	f.state = f.state.apply(sig, id, f.now())
	f.mu.Unlock()
}

func (f *Tracker) nextID() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastID++
	return f.lastID
}

// Lag judges the cache now: behind once disconnected past maxStaleness or silent past silence.
func (f *Tracker) Lag(maxStaleness, silence time.Duration) Lag {
	if f == nil { // a cache not tracked
		return Lag{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	since, behind, why := f.state.lag(now, maxStaleness, silence)
	l := Lag{Cache: f.name, Title: f.title, Behind: behind, Why: why}
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
	Cache string // its name (deployments, pods, services or records)
	Title string // how a message names it
	// Since is when the cache may have started missing changes (zero if current); For, how long ago.
	Since time.Time
	For   time.Duration
	// Behind: For is past the staleness or silence bound; reads needing the cache answer 503.
	Behind bool
	Why    string
}

func (l Lag) String() string {
	return fmt.Sprintf("%s out of date since %s (%s): %s", l.Title,
		l.Since.UTC().Format(time.RFC3339), l.For.Round(time.Second), l.Why)
}
