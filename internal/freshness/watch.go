package freshness

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Wrap returns lw reporting to the tracker: the ListerWatcher for the cache's reflector.
func (f *Tracker) Wrap(lw cache.ListerWatcher) cache.ListerWatcher { return &trackedLW{lw: lw, f: f} }

// trackedLW is a cache's ListerWatcher that reports what happens to it.
type trackedLW struct {
	lw cache.ListerWatcher
	f  *Tracker
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

// lastPage: a paged list is complete with the page that has no continue token.
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
	f     *Tracker
	id    uint64
	out   chan watch.Event
	done  chan struct{}
	once  sync.Once
}

func (w *trackedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop ends the watch, reported before Stop returns so it precedes the next watch's opening.
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
			// Reported before the reflector sees the close, so before its next watch.
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
