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

	"github.com/dcm-project/k8s-container-sp/internal/freshness"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// The wrapped ListerWatcher reports what the reflector does with it, and reads refuse a
// cache past the bound: a real informer over a scripted list and watch, on a fake clock.
func TestTrackedInformer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &Store{fresh: map[string]*freshness.Tracker{}, MaxStaleness: 5 * time.Second, SilenceBound: SilenceBound}
	for _, name := range Caches {
		s.fresh[name] = freshness.NewTracker(name, cacheTitle[name], clk.Now, nil)
	}
	f := s.fresh[CachePods]
	sl := newScriptedLW()
	inf := cache.NewSharedIndexInformer(f.Wrap(sl), &corev1.Pod{}, 0, cache.Indexers{})
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
			if l := f.Lag(s.MaxStaleness, s.SilenceBound); cond(l) {
				return l
			}
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s: %+v", what, f.Lag(s.MaxStaleness, s.SilenceBound))
			case <-time.After(time.Millisecond):
			}
		}
	}
	w1.Add(pod("1"))
	// Listed and watching, the cache is as old as its list until the watch sends
	// something: then it is current (no Since).
	wait("the event", func(l Lag) bool { return l.Since.IsZero() })
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
	if l := f.Lag(s.MaxStaleness, s.SilenceBound); l.Behind || !l.Since.Equal(broke) {
		t.Fatalf("after G: %+v, want not yet behind, since %v", l, broke)
	}
	clk.Step(time.Second)
	if l := f.Lag(s.MaxStaleness, s.SilenceBound); !l.Behind || !l.Since.Equal(broke) || l.For != 6*time.Second {
		t.Fatalf("past G: %+v, want behind for 6 s", l)
	}
	err := s.checkFresh()
	var se *kubeerr.Error
	if !errors.As(err, &se) || se.Kind != kubeerr.KindUnavailable || se.RetryAfter == 0 ||
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
