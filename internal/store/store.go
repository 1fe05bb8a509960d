package store

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
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

	factory     informers.SharedInformerFactory
	deployments cache.SharedIndexInformer
	pods        cache.SharedIndexInformer
	services    cache.SharedIndexInformer
	records     cache.SharedIndexInformer
	// index finds a container's cached objects (index.go); watchers are told of
	// changes once it has them (Watch).
	index    *containerIndex
	watchers watchers
	// handled: the store's handler of each informer has seen its first list.
	handled []cache.InformerSynced
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
	// garbage collector deletes whatever the create makes after) or makes nothing, so
	// the 404 is never followed by a container from a create that began before it (the
	// chaos run's seed 7: a DELETE answered 404 while a create sent 32 ms earlier was
	// still reserving its id through an apiserver restart). Both are intervals on one
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
	// recent is each informer's cache with the objects this replica wrote on top, by
	// kind (see wrote): what every read goes through.
	recent [kinds]*recent
	// byName: the caches key an object by its name alone (cached.KeysByName).
	byName bool
}

// recentTTL bounds how long an object this replica wrote is read from its own
// write rather than from the informer's cache: the informer shows it within
// milliseconds, and a cache behind by more than MaxStaleness answers 503 anyway.
const recentTTL = time.Minute

// recentSize bounds how many objects of each kind are held so: more than the creates
// and deletes in flight at once.
const recentSize = 1024

// New builds the store and its informers (not started). Every informer watches only
// objects labelled as DCM containers, in the configured namespace, and reports the
// health of its watch (see freshness.go).
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
		byName:        cached.KeysByName(),
	}
	s.index = newContainerIndex()
	s.Access = access.New(client, namespace, func() time.Time { return s.Clock.Now() })
	s.factory = informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithNamespace(namespace),
		// The caches hold every container's objects: only what the service reads.
		informers.WithTransform(s.transform),
	)
	s.fresh = map[string]*freshness.Tracker{}
	for _, name := range Caches {
		s.fresh[name] = freshness.NewTracker(name, cacheTitle[name], func() time.Time { return s.Clock.Now() }, log)
	}
	s.deployments = s.informer(&appsv1.Deployment{}, CacheDeployments, listWatch(client,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().Deployments(namespace).List(ctx, o)
		}, client.AppsV1().Deployments(namespace).Watch))
	s.pods = s.informer(&corev1.Pod{}, CachePods, listWatch(client,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods(namespace).List(ctx, o)
		}, client.CoreV1().Pods(namespace).Watch))
	s.services = s.informer(&corev1.Service{}, CacheServices, listWatch(client,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Services(namespace).List(ctx, o)
		}, client.CoreV1().Services(namespace).Watch))
	// Records are ConfigMaps: only those labelled as records are listed and watched,
	// never the namespace's other ConfigMaps.
	s.records = s.informer(&corev1.ConfigMap{}, CacheRecords, listWatchSelected(client, container.RecordSelector,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().ConfigMaps(namespace).List(ctx, o)
		}, client.CoreV1().ConfigMaps(namespace).Watch))
	for k, inf := range s.informers() {
		s.recent[k] = newRecent(inf.GetStore(), recentTTL, recentSize, func() time.Time { return s.Clock.Now() })
		reg, err := inf.AddEventHandler(s.handler(kind(k)))
		if err != nil {
			return nil, err
		}
		s.handled = append(s.handled, reg.HasSynced)
	}
	return s, nil
}

// DefaultReserveWindow is Store.ReserveWindow unless configured: many times what a
// record's create takes on a healthy apiserver (milliseconds), short enough for a
// DELETE of an unknown id to wait.
const DefaultReserveWindow = time.Second

// transform is the informers' transform: cached.Of, with the id of a container's
// objects held once (the one its first cached object has, found in the index) rather
// than once per object.
func (s *Store) transform(obj any) (any, error) {
	return cached.OfSharing(obj, s.index.sharedID, s.byName)
}

// key is the caches' key of the object named name.
func (s *Store) key(name string) string { return cached.Key(s.namespace, name, s.byName) }

// wrote puts an object this replica wrote (the apiserver's answer) into its caches,
// as their informer will: read-your-writes without waiting for the watch. The index
// learns of it too; the watchers are told by the informer, as of any change.
func (s *Store) wrote(k kind, id string, obj runtime.Object) {
	c, err := s.transform(obj)
	if err != nil {
		return
	}
	m, ok := c.(metav1.Object)
	if !ok {
		return
	}
	s.recent[k].wrote(c)
	s.index.add(id, objRef{name: m.GetName(), kind: k})
}

// informer is the factory's informer of obj's type, built as the factory's own would be
// (resync, the transform the factory sets) but over a ListerWatcher
// that reports the health of its watch to the cache's freshness.
func (s *Store) informer(obj runtime.Object, name string, lw cache.ListerWatcher) cache.SharedIndexInformer {
	return s.factory.InformerFor(obj, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		// No informer index: the store's own (index.go) finds a container's objects,
		// and the caches are of one namespace.
		return cache.NewSharedIndexInformerWithOptions(s.fresh[name].Wrap(lw), obj,
			cache.SharedIndexInformerOptions{ResyncPeriod: resync})
	})
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

func (s *Store) informers() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{s.deployments, s.pods, s.services, s.records}
}

// Watch calls changed with a container's id on every change to its record,
// Deployment, Pods or Service (what the status reporter decides on) until the returned
// function is called. It is called once the store's index has the change (see
// containerIndex), from the informer's handler goroutine: it must not block.
func (s *Store) Watch(changed func(id string)) (stop func(), err error) {
	stop = s.watchers.add(changed)
	// As an informer tells a handler added late of every object it holds: a watcher
	// that starts late (a new leadership) hears of every id the caches hold, a
	// Service a gone container left behind included.
	all := func(*indexEntry) bool { return true }
	s.index.after("", all, func(id string, _ []objRef) bool {
		changed(id)
		return true
	})
	return stop, nil
}

// handler is the store's event handler of the informer of kind k: it keeps the index,
// then tells the watchers.
func (s *Store) handler(k kind) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.changed(k, nil, obj) },
		UpdateFunc: func(old, obj any) {
			s.changed(k, old, obj)
		},
		DeleteFunc: func(obj any) {
			s.recent[k].gone(finalState(obj)) // a write of ours is not read back over it
			if id, r := refOf(k, obj); id != "" {
				if m, ok := finalState(obj).(metav1.Object); ok && k == deploymentKind {
					s.index.endDeployment(id, container.IncarnationOf(m))
				}
				s.index.remove(id, r)
				s.watchers.tell(id)
			}
		},
	}
}

// changed indexes an object added or updated (old: its previous state, for an update;
// an update may move an object to another id if someone relabels it).
func (s *Store) changed(k kind, old, obj any) {
	s.recent[k].seen(obj) // the informer may have caught up with a write of ours
	id, r := refOf(k, obj)
	if old != nil {
		if was, wr := refOf(k, old); was != "" && was != id {
			s.index.remove(was, wr)
			s.watchers.tell(was)
		}
	}
	if id != "" {
		s.index.add(id, r)
		s.watchers.tell(id)
	}
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

// Start starts the informers; they stop when ctx ends.
func (s *Store) Start(ctx context.Context) {
	s.factory.Start(ctx.Done())
}

// Synced reports whether every cache has completed its first list.
func (s *Store) Synced() bool {
	for _, inf := range s.informers() {
		if !inf.HasSynced() {
			return false
		}
	}
	for _, handled := range s.handled {
		if !handled() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until the caches are synced or ctx ends.
func (s *Store) WaitForSync(ctx context.Context) bool {
	synced := slices.Clone(s.handled)
	for _, inf := range s.informers() {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Shutdown stops the informers (after the Start context is cancelled) and waits.
func (s *Store) Shutdown() { s.factory.Shutdown() }

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
func (s *Store) Snapshot(id string) container.Snapshot {
	return s.snapshotOf(id, s.index.refs(id))
}

// snapshotOf reads the objects refs name from the caches (with this replica's own
// writes on top: Store.wrote).
func (s *Store) snapshotOf(id string, refs []objRef) container.Snapshot {
	var snap container.Snapshot
	for _, r := range refs {
		switch r.kind {
		case deploymentKind:
			snap.Deployments = cached.AppendView[container.Deployment](snap.Deployments, s.recent[r.kind], s.key(r.name))
		case podKind:
			snap.Pods = cached.AppendView[container.Pod](snap.Pods, s.recent[r.kind], s.key(r.name))
		case serviceKind:
			snap.Services = cached.AppendView[container.Service](snap.Services, s.recent[r.kind], s.key(r.name))
		case recordKind:
			if obj, ok, _ := s.recent[r.kind].GetByKey(s.key(r.name)); ok {
				if rec, ok := cached.RecordOf(obj, id); ok {
					snap.Record = &rec
				}
			}
		}
	}
	slices.SortFunc(snap.Deployments, func(a, b *container.Deployment) int {
		return a.Created.Compare(b.Created)
	})
	return snap
}

// IDs lists every container id the caches know: live, being deleted, or with a record
// (a DELETED still owed).
func (s *Store) IDs() []string {
	var ids []string
	s.index.after("", (*indexEntry).known, func(id string, _ []objRef) bool {
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
	live := func(e *indexEntry) bool { return e.has(deploymentKind) }
	s.index.after(after, live, func(id string, refs []objRef) bool {
		o, ok := s.snapshotOf(id, refs).Observed()
		if !ok {
			return true // being deleted, or gone since the id was listed
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

// finalState is a deleted object's last state as its informer knew it.
func finalState(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// instanceIDOf is the DCM id of a cached object (or of a deleted one's last state).
func instanceIDOf(obj any) string {
	switch o := finalState(obj).(type) {
	case interface{ InstanceID() string }:
		return o.InstanceID()
	case metav1.Object:
		return container.InstanceID(o.GetLabels())
	}
	return ""
}

// waitCached waits (bounded by ctx) until done() holds for what the informer caches
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
