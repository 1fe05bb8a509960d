package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/dcm-project/k8s-container-sp/internal/access"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/freshness"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// Store reads and writes containers in one namespace.
type Store struct {
	client    kubernetes.Interface
	namespace string
	log       *slog.Logger

	// informers are the caches: one per kind, label-selected, each object cut to the
	// view the service reads, with this replica's own writes laid over them (wrote).
	informers *informers
	running   sync.WaitGroup
	// Access names the permission a refused call lacks.
	Access *access.Checker

	// Clock tells the age of records and how long a cache has been behind.
	Clock clock.PassiveClock
	// Confirm confirms cache misses. Its own rate limiter keeps a flood of unknown ids
	// from delaying other calls, leader renewal included. Default: the main client.
	Confirm kubernetes.Interface
	// CreateTimeout bounds one create. An older record with no Deployment is abandoned.
	CreateTimeout time.Duration
	// ReserveWindow orders a DELETE after any create of its id that began before it,
	// on any replica, with no lock: a create goes on only if it had its record within
	// the window, and a DELETE that finds no record looks again after it before its
	// 404 (docs/architecture.md).
	ReserveWindow time.Duration
	// MaxStaleness: reads answer 503 once a cache's watch has been down this long.
	MaxStaleness time.Duration
	// SilenceBound: a connected watch silent this long, not even a bookmark, is behind.
	SilenceBound time.Duration
	fresh        map[string]*freshness.Tracker // by cache name
}

// New builds the store and its informers (not started). Every informer lists and
// watches only objects labelled as DCM containers, in the configured namespace, and
// reports the health of its watch (see freshness.go).
func New(client kubernetes.Interface, namespace string, log *slog.Logger) (*Store, error) {
	s := &Store{
		client:        client,
		namespace:     namespace,
		log:           log,
		Clock:         clock.RealClock{},
		Confirm:       client,
		CreateTimeout: 20 * time.Second,
		ReserveWindow: DefaultReserveWindow,
		MaxStaleness:  DefaultMaxStaleness,
		SilenceBound:  SilenceBound,
	}
	now := func() time.Time { return s.Clock.Now() }
	s.Access = access.New(client, namespace, now)
	s.fresh = map[string]*freshness.Tracker{}
	for _, name := range Caches {
		s.fresh[name] = freshness.NewTracker(name, cacheTitle[name], now, log)
	}
	// Records are ConfigMaps: only those labelled as records are listed and watched,
	// never the namespace's other ConfigMaps. The typed clients speak protobuf to the
	// apiserver, which decodes several times faster than JSON.
	apps, core := client.AppsV1(), client.CoreV1()
	lws := [kinds]*cache.ListWatch{
		listWatch(container.Selector, apps.Deployments(namespace).List, apps.Deployments(namespace).Watch),
		listWatch(container.Selector, core.Pods(namespace).List, core.Pods(namespace).Watch),
		listWatch(container.Selector, core.Services(namespace).List, core.Services(namespace).Watch),
		listWatch(container.RecordSelector, core.ConfigMaps(namespace).List, core.ConfigMaps(namespace).Watch),
	}
	var tracked [kinds]cache.ListerWatcher
	for k, lw := range lws {
		tracked[k] = s.fresh[Caches[k]].Wrap(cache.ToListWatcherWithWatchListSemantics(lw, client))
	}
	s.informers = newInformers(namespace, tracked)
	return s, nil
}

// listWatch lists and watches what selector selects, through a typed client's List and Watch.
func listWatch[L runtime.Object](selector string, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			l, err := list(ctx, o)
			if err != nil {
				return nil, err // not a typed nil in an interface
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return watchFn(ctx, o)
		},
	}
}

// DefaultReserveWindow is many times a record's create, short enough for a DELETE to wait.
const DefaultReserveWindow = time.Second

// wrote lays an object this replica wrote (the apiserver's answer) over the
// informers until they show it: read-your-writes without waiting for the watch.
func (s *Store) wrote(obj runtime.Object) {
	if o, ok := objectOf(obj); ok {
		s.informers.wrote(o)
	}
}

// Watch calls changed (which must not block) with the id of every change the store shows,
// a write leaving the overlay included, until stop; first with every id it holds.
func (s *Store) Watch(changed func(id string)) (stop func(), err error) {
	return s.informers.watch(changed), nil
}

// Start runs the informers until ctx ends, each once the one before it has synced:
// an informer holds its whole first list until the list ends, so one at a time holds
// one.
func (s *Store) Start(ctx context.Context) {
	s.running.Go(func() {
		for k, inf := range s.informers.of {
			s.running.Go(func() { inf.RunWithContext(ctx) })
			if !cache.WaitForCacheSync(ctx.Done(), s.informers.handled[k].HasSynced) {
				return
			}
		}
	})
	s.running.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { s.informers.sweep() }, sweepEvery) })
}

// sweepEvery is how often the overlay drops writes a relist or a bookmark passed.
const sweepEvery = time.Second

// Synced reports whether every informer has synced, its handler included.
func (s *Store) Synced() bool {
	for k := range kinds {
		if !s.informers.synced(k) {
			return false
		}
	}
	return true
}

// WaitForSync blocks until the informers are synced or ctx ends.
func (s *Store) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.Synced)
}

// Shutdown waits for the informers to stop (after the Start context is cancelled).
func (s *Store) Shutdown() { s.running.Wait() }

var errNotSynced = &kubeerr.Error{Kind: kubeerr.KindUnavailable, Message: "the provider has not loaded the cluster state yet"}

// Get returns one container from the caches. A miss is confirmed before it becomes a
// 404 (see confirmMiss), so a 404 is authoritative even on a replica whose cache has not
// yet seen a container another replica just created.
func (s *Store) Get(ctx context.Context, id string) (container.Observed, error) {
	if !s.Synced() {
		return container.Observed{}, errNotSynced
	}
	if err := s.checkFresh(); err != nil {
		return container.Observed{}, err
	}
	if o, ok := s.Snapshot(id).Observed(); ok {
		return o, nil
	}
	return s.confirmMiss(ctx, id)
}

// Snapshot reads one container's objects from the caches, its record included.
func (s *Store) Snapshot(id string) container.Snapshot { return s.informers.snapshot(id) }

// IDs lists every container id the caches know: live, being deleted, or with a record
// (a DELETED still owed).
func (s *Store) IDs() []string {
	var ids []string
	s.informers.walk("", func(id string) bool {
		ids = append(ids, id)
		return true
	})
	return ids
}

// List returns up to limit containers whose ids sort after `after`, in id order, and
// whether more follow. Paging by id keeps a walk stable while containers come and go:
// a container that exists for the whole walk is returned exactly once.
func (s *Store) List(after string, limit int) ([]container.Observed, bool, error) {
	if !s.Synced() {
		return nil, false, errNotSynced
	}
	if err := s.checkFresh(); err != nil {
		return nil, false, err
	}
	out, more := s.page(after, limit)
	return out, more, nil
}

// page reads up to limit containers after `after` from the caches.
func (s *Store) page(after string, limit int) ([]container.Observed, bool) {
	var out []container.Observed
	more := false
	s.informers.walk(after, func(id string) bool {
		o, ok := s.Snapshot(id).Observed()
		if !ok {
			return true // being deleted
		}
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, o)
		return true
	})
	return out, more
}

// waitCached waits (bounded by ctx) until done() holds for what the caches
// show, so a read right after a write answers consistently with it.
func waitCached(ctx context.Context, done func() bool) error {
	for delay := time.Millisecond; ; delay = min(delay*2, 20*time.Millisecond) {
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("cache did not catch up in time")
		case <-time.After(delay):
		}
	}
}
