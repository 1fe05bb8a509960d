package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/dcm-project/k8s-container-sp/internal/access"
	"github.com/dcm-project/k8s-container-sp/internal/cached"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/freshness"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// Store reads and writes containers in one namespace.
type Store struct {
	client    kubernetes.Interface
	namespace string
	log       *slog.Logger

	// table is the cache: every container's objects, one entry each, written by the
	// reflectors (one per kind, listing and watching straight into it) and by this
	// replica's own writes (wrote). The watchers are told of each change once the
	// table has it (Watch).
	table      *cached.Table
	sources    [kinds]*cached.Source
	reflectors [kinds]*cache.Reflector
	running    sync.WaitGroup
	watchers   watchers
	// Access knows the permissions the store's calls need, and names what a refused one
	// lacks (explainForbidden).
	Access *access.Checker

	// Clock tells the age of records (the abandoned-create rule) and how long a cache has been
	// out of date (freshness.go).
	Clock clock.PassiveClock
	// Confirm is the client that confirms cache misses (confirmMiss): its own rate
	// limiter, so a flood of GETs for unknown ids never delays the provider's other
	// Kubernetes calls (leader renewal included). Default: the main client.
	Confirm kubernetes.Interface
	// CreateTimeout bounds one create, record to Deployment. A record older than twice
	// this with no Deployment is not a create in progress (abandonedByAge).
	CreateTimeout time.Duration
	// ReserveWindow orders a DELETE after any create of its id that began before it, on
	// any replica, with no shared lock: a create that began at C goes on to make its
	// Deployment only if it had its record by C+ReserveWindow, else it takes the record
	// back (503); a DELETE that began at D and whose cache shows no live record looks
	// again, at the apiserver, at D+ReserveWindow before its 404. A create that began
	// before D either has its record by then (the DELETE finds it and deletes it, and the
	// status controller deletes whatever the create makes after) or makes nothing, so
	// the 404 is never followed by a container from a create that began before it,
	// however slow its record's create (an apiserver restart). Both are intervals on one
	// replica's clock: no two clocks are compared. Cost: a DELETE of an id this
	// replica's cache does not show answers after ReserveWindow (docs/architecture.md).
	ReserveWindow time.Duration
	// MaxStaleness: a cache whose watch has been disconnected longer than this is
	// behind, and reads that need it answer 503 (see freshness.go).
	MaxStaleness time.Duration
	// SilenceBound: a cache whose watch is connected but has sent nothing, not even a
	// bookmark, for longer than this is behind. Default: the constant SilenceBound.
	SilenceBound time.Duration
	fresh        map[string]*freshness.Tracker // by cache name
}

// The kinds of the cached objects, as the table names them.
const (
	deploymentKind = cached.Deployments
	podKind        = cached.Pods
	serviceKind    = cached.Services
	recordKind     = cached.Records
	kinds          = 4
)

type kind = cached.Kind

// New builds the store and its reflectors (not started). Every reflector lists and
// watches only objects labelled as DCM containers, in the configured namespace, and
// reports the health of its watch (see freshness.go).
func New(client kubernetes.Interface, namespace string, resync time.Duration, log *slog.Logger) (*Store, error) {
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
	s.table = cached.NewTable(namespace, now)
	s.table.OnChange(s.watchers.tell)
	s.fresh = map[string]*freshness.Tracker{}
	for _, name := range Caches {
		s.fresh[name] = freshness.NewTracker(name, cacheTitle[name], func() time.Time { return s.Clock.Now() }, log)
	}
	s.reflect(deploymentKind, &appsv1.Deployment{}, CacheDeployments, resync, listWatch(client,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().Deployments(namespace).List(ctx, o)
		}, client.AppsV1().Deployments(namespace).Watch))
	s.reflect(podKind, &corev1.Pod{}, CachePods, resync, listWatch(client,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods(namespace).List(ctx, o)
		}, client.CoreV1().Pods(namespace).Watch))
	s.reflect(serviceKind, &corev1.Service{}, CacheServices, resync, listWatch(client,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Services(namespace).List(ctx, o)
		}, client.CoreV1().Services(namespace).Watch))
	// Records are ConfigMaps: only those labelled as records are listed and watched,
	// never the namespace's other ConfigMaps.
	s.reflect(recordKind, &corev1.ConfigMap{}, CacheRecords, resync, listWatchSelected(client, container.RecordSelector,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().ConfigMaps(namespace).List(ctx, o)
		}, client.CoreV1().ConfigMaps(namespace).Watch))
	return s, nil
}

// DefaultReserveWindow is Store.ReserveWindow unless configured: many times what a
// record's create takes on a healthy apiserver (milliseconds), short enough for a
// DELETE of an unknown id to wait.
const DefaultReserveWindow = time.Second

// wrote puts an object this replica wrote (the apiserver's answer) into the table, as
// its watch will: read-your-writes without waiting for the watch. The watchers are
// told by the watch, as of any change.
func (s *Store) wrote(obj runtime.Object) { s.table.Wrote(obj) }

// reflect makes the reflector of kind k: client-go's, as an informer would make it
// (the resync period, the watch-list when the client can stream one), over a
// ListerWatcher that reports the health of its watch to the cache's freshness, writing
// into the table.
func (s *Store) reflect(k kind, obj runtime.Object, name string, resync time.Duration, lw cache.ListerWatcher) {
	s.sources[k] = s.table.Source(k)
	s.reflectors[k] = cache.NewReflectorWithOptions(s.fresh[name].Wrap(lw), obj, s.sources[k],
		cache.ReflectorOptions{Name: name, ResyncPeriod: resync})
}

// listWatch lists and watches the objects labelled as DCM containers, as the informer
// factory's informers do (and, like them, says whether the client can stream a list).
func listWatch(client kubernetes.Interface,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.ListerWatcher {
	return listWatchSelected(client, container.Selector, list, watchFn)
}

// listWatchSelected is listWatch with the label selector sel.
func listWatchSelected(client kubernetes.Interface, sel string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return watchFn(ctx, o)
		},
	}, client)
}

// Watch calls changed with a container's id on every change to its record,
// Deployment, Pods or Service (what the status reporter decides on) until the returned
// function is called. It is called once the table has the change, from the goroutine
// of a kind's reflector: it must not block.
func (s *Store) Watch(changed func(id string)) (stop func(), err error) {
	stop = s.watchers.add(changed)
	// As an informer tells a handler added late of every object it holds: a watcher
	// that starts late (a new leadership) hears of every id the caches hold, a
	// Service a gone container left behind included.
	s.table.EachID(cached.Any, func(id string) bool {
		changed(id)
		return true
	})
	return stop, nil
}

// watchers are the functions Watch was given.
type watchers struct {
	mu   sync.RWMutex
	next int
	fns  map[int]func(string)
}

func (w *watchers) add(fn func(string)) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(string){}
	}
	n := w.next
	w.next++
	w.fns[n] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, n)
	}
}

func (w *watchers) tell(id string) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, fn := range w.fns {
		fn(id)
	}
}

// Start starts the reflectors; they stop when ctx ends. Each starts once the one
// before it has its first list in the table: a reflector holds its whole first list
// (as the table keeps it, in a store of its own) until the list ends, so four lists
// streamed at once hold four of them. At 100,000 containers that took the live heap
// to 235 MB during the sync and the heap to 450 MB, which the process kept as RSS long
// after (docs/model.md); one at a time, it holds one.
func (s *Store) Start(ctx context.Context) {
	s.running.Go(func() {
		for k, r := range s.reflectors {
			s.running.Go(func() { r.RunWithContext(ctx) })
			select {
			case <-s.sources[k].Synced():
			case <-ctx.Done():
				return
			}
		}
	})
}

// Synced reports whether every cache has its first list.
func (s *Store) Synced() bool {
	for _, src := range s.sources {
		if !src.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until the caches are synced or ctx ends.
func (s *Store) WaitForSync(ctx context.Context) bool {
	for _, src := range s.sources {
		select {
		case <-src.Synced():
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Shutdown waits for the reflectors to stop (after the Start context is cancelled).
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
	if o, ok := s.observed(id); ok {
		return o, nil
	}
	return s.confirmMiss(ctx, id)
}

// observed gathers a container's objects from the caches; false when it has no live
// Deployment under a live record (it is gone, being deleted, or not made yet).
func (s *Store) observed(id string) (container.Observed, bool) {
	return s.Snapshot(id).Observed()
}

// Snapshot reads one container's objects from the caches, its record included.
func (s *Store) Snapshot(id string) container.Snapshot { return s.table.Snapshot(id) }

// IDs lists every container id the caches know: live, being deleted, or with a record
// (a DELETED still owed).
func (s *Store) IDs() []string {
	var ids []string
	s.table.EachID(cached.Known, func(id string) bool {
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
	s.table.Walk(after, cached.Live, func(_ string, snap container.Snapshot) bool {
		o, ok := snap.Observed()
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
